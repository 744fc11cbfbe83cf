"""Run one component as its own process, ended by Ctrl-C or SIGTERM with exit code 0.

    python -m ros2_cuda_ipc_tools.components.run_component ros2_cuda_ipc_examples::Preview --ros-args -r __ns:=/fanout

Each example node's console script is this for its own class. A node that cannot start with the
parameters it was given (a value out of range, CUDA asked for where there is none) says so in one
line and exits with code 2, without a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
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
    from .registry import UnknownComponentError, component_class

    follow_runner()

    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        raise SystemExit(f"usage: {sys.argv[0]} package::Class [--ros-args ...]")
    try:
        node_class = component_class(sys.argv[1])
    except UnknownComponentError as exc:
        raise SystemExit(str(exc)) from None
    raise SystemExit(run_component(node_class, sys.argv[2:]))


if __name__ == "__main__":
    main()
