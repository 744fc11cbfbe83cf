"""Run one component as its own process, ended by Ctrl-C or SIGTERM with exit code 0.

    python -m ros2_cuda_ipc_tools.components.run_component ros2_cuda_ipc_examples::Preview --ros-args -r __ns:=/fanout

Each example node's console script is this for its own class. A node that cannot start with the
parameters it was given (a value out of range, CUDA asked for where there is none) says so in one
line and exits with code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ros2_cuda_ipc_core import STARTUP_ERRORS, run_node

__all__ = ["CONFIGURATION_ERRORS", "run_component"]

#: What a node raises when its parameters cannot work: a clear message, no traceback.  A component signals
#: "cannot start with these parameters" by raising a ``ValueError`` (or a subclass) from its constructor.
CONFIGURATION_ERRORS: tuple[type[Exception], ...] = STARTUP_ERRORS


def run_component(node_class: Callable[[], Any], argv: list[str] | None = None) -> int:
    """Spin one ``node_class()`` until SIGINT / SIGTERM; exit code 0, or 2 with one line if it cannot start.

    ``-h`` / ``--help`` before any ``--ros-args`` prints the node's parameters from its table, ``--version`` its
    version; any other argument there is refused with exit code 2 (core's ``run_node``).
    """
    return run_node(node_class, sys.argv[1:] if argv is None else argv)


def main() -> None:
    from ros2_cuda_ipc_core import tool_parser

    from .parent_watch import follow_runner
    from .registry import UnknownComponentError, available_components, component_class

    follow_runner()
    parser = tool_parser(__name__, __doc__, prog="run_component")
    registered = f"registered components (package::Class): {' '.join(available_components()) or 'none'}"
    parser.epilog = registered
    parser.usage = "%(prog)s [-h] [--version] PACKAGE::CLASS [--help | --ros-args -p NAME:=VALUE -r FROM:=TO ...]"
    # Optional to argparse, so that a bare 'run_component' is told what to give rather than 'node_arguments'.
    parser.add_argument("component", metavar="PACKAGE::CLASS", nargs="?",
                        help="the component to run (container --list names them)")
    parser.add_argument("node_arguments", nargs=argparse.REMAINDER,
                        help="the node's own: --help for its parameters, --ros-args -p NAME:=VALUE -r FROM:=TO ...")
    args = parser.parse_args(sys.argv[1:])
    if args.component is None:
        parser.error(f"give the component to run, as PACKAGE::CLASS; {registered}")
    try:
        node_class = component_class(args.component)
    except UnknownComponentError as exc:
        parser.error(str(exc))
    raise SystemExit(run_node(node_class, args.node_arguments, prog=f"run_component {args.component}"))


if __name__ == "__main__":
    main()
