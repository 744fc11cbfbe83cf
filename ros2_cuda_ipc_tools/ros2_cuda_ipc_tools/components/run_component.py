"""Run one component as its own process, ended by Ctrl-C or SIGTERM with exit code 0.

    python -m ros2_cuda_ipc_tools.components.run_component ros2_cuda_ipc_examples::Preview --ros-args -r __ns:=/fanout

Each example node's console script is this for its own class. A node that cannot start with the
parameters it was given (a value out of range, CUDA asked for where there is none) says so in one
line and exits with code 2, without a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ros2_cuda_ipc_core import run_nodes

__all__ = ["CONFIGURATION_ERRORS", "run_component"]

#: What a node raises when its parameters cannot work: a clear message, no traceback.  A component signals
#: "cannot start with these parameters" by raising a ``ValueError`` (or a subclass) from its constructor.
CONFIGURATION_ERRORS: tuple[type[Exception], ...] = (ValueError,)


def _parameter_errors() -> tuple[type[Exception], ...]:
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

    return (*CONFIGURATION_ERRORS, InvalidParameterTypeException, InvalidParameterValueException)


def run_component(node_class: Callable[[], Any], argv: list[str] | None = None) -> int:
    """Spin one ``node_class()`` until SIGINT / SIGTERM; exit code 0, or 2 with one line if it cannot start.

    ``-h`` / ``--help`` before any ``--ros-args`` prints the node's module documentation.
    """
    args = sys.argv[1:] if argv is None else argv
    own = args[: args.index("--ros-args")] if "--ros-args" in args else args
    if "-h" in own or "--help" in own:
        print(sys.modules[node_class.__module__].__doc__ or node_class.__doc__)
        return 0
    try:
        return run_nodes(lambda: [node_class()], args=[sys.argv[0], *args])
    except _parameter_errors() as exc:
        print(f"{getattr(node_class, '__name__', node_class)}: {exc}", file=sys.stderr)
        return 2


def main() -> None:
    from .parent_watch import follow_runner
    from .registry import UnknownComponentError, available_components, component_class

    follow_runner()

    usage = f"usage: {Path(sys.argv[0]).name} package::Class [--ros-args ...]"
    if sys.argv[1:2] in (["-h"], ["--help"]):  # the tools' rule: --help is exit code 0, a bad argument 2
        print(f"{usage}\n\n{__doc__}\nregistered components:\n  " + "\n  ".join(available_components()))
        raise SystemExit(0)
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(usage, file=sys.stderr)
        raise SystemExit(2)
    try:
        node_class = component_class(sys.argv[1])
    except UnknownComponentError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(run_component(node_class, sys.argv[2:]))


if __name__ == "__main__":
    main()
