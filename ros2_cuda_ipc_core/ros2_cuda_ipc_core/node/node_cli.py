"""The command line of a node's executable: ``--help`` made from its parameter table, ``--version``, and a
refusal (exit code 2) of anything else before ``--ros-args``; a ``-p NAME:=VALUE`` the node has no parameter for
is a warning naming the closest one.

Everything after ``--ros-args`` belongs to ROS (``-p name:=value``, ``-r from:=to``).  A node that cannot
start with its parameters (a :class:`ValueError`, such as :class:`ParameterError`, from its constructor, or a
parameter rclpy itself refuses) says so in one line and exits with code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import inspect
import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .parameters import parameter_table, warn_unknown_parameters
from .shutdown import run_nodes

__all__ = ["STARTUP_ERRORS", "node_help", "parse_node_arguments", "plain_text", "refuse_unusable_memory", "run_node",
           "tool_parser", "version_of"]

#: What a node raises when its parameters cannot work: one line, exit code 2.
STARTUP_ERRORS: tuple[type[Exception], ...] = (ValueError,)

_ROLES = re.compile(r":(?:mod|class|meth|func|attr|obj|data|exc):`~?([^`]+)`")
_ROS2_RUN = re.compile(r"\bros2 run \S+ ")


def plain_text(docstring: str) -> str:
    """A docstring as a terminal shows it: no ``literal`` quotes, no ``:role:`target``` markup, and where there is no
    ``ros2`` command (ROS from PyPI), ``ros2 run PACKAGE EXECUTABLE`` as the plain ``EXECUTABLE`` that works here."""
    text = _ROLES.sub(lambda match: match.group(1).rsplit(".", 1)[-1], inspect.cleandoc(docstring))
    if shutil.which("ros2") is None:
        text = _ROS2_RUN.sub("", text)
    return text.replace("``", "")


def tool_parser(module: str, description: str | None, *, prog: str | None = None,
                formatter_class: type[argparse.HelpFormatter] = argparse.RawDescriptionHelpFormatter,
                ) -> argparse.ArgumentParser:
    """The argument parser of a command-line tool: its docstring as plain text, and ``--version``."""
    parser = argparse.ArgumentParser(prog=prog, description=plain_text(description or ""),
                                     formatter_class=formatter_class)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version_of(module)}")
    return parser


def version_of(module: str) -> str:
    """The installed version of the distribution ``module`` comes from (its top-level package name; for
    ``__main__``, the module ``python -m`` ran)."""
    spec = getattr(sys.modules.get(module), "__spec__", None)
    package = (spec.name if spec is not None else module).split(".", 1)[0]
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def refuse_unusable_memory(parser: argparse.ArgumentParser, memory: str, option: str = "--memory") -> None:
    """A tool's GPU-only mode refused at once (exit code 2, saying why) where CUDA cannot work, before it starts
    children that would die of it or wait on them."""
    from ..memory.cuda_driver import unavailable_reason

    reason = unavailable_reason(0) if memory == "cuda" else None
    if reason is not None:
        parser.error(f"{option} cuda cannot be used here: {reason}")


def node_help(node_class: type, prog: str) -> str:
    """What ``prog --help`` prints: the node's docstring and every parameter of its table with its default."""
    table = parameter_table(node_class)
    lines = [f"usage: {prog} [-h] [--version] [--ros-args -p NAME:=VALUE -r FROM:=TO ...]", ""]
    lines.append(plain_text(node_class.__doc__ or node_class.__name__))
    if table:
        lines += ["", "parameters (set with --ros-args -p NAME:=VALUE):"]
        width = max(len(name) for name in table)
        for entry in table.values():
            default = repr(entry.default) if isinstance(entry.default, str) else str(entry.default).lower() \
                if isinstance(entry.default, bool) else str(entry.default)
            lines.append(f"  {entry.name:<{width}}  {plain_text(entry.help)} (default: {default})")
    lines += ["", "options:", "  -h, --help  show this help and exit", "  --version   show the version and exit"]
    return "\n".join(lines)


def parse_node_arguments(node_class: type, argv: Sequence[str], prog: str) -> list[str]:
    """Check the arguments before ``--ros-args``: print help or the version and exit 0, refuse others (exit 2).

    Returns what is left for ``rclpy.init`` (``--ros-args`` and after)."""
    args = list(argv)
    split = args.index("--ros-args") if "--ros-args" in args else len(args)
    own, ros = args[:split], args[split:]
    parser = argparse.ArgumentParser(prog=prog, add_help=False)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version_of(node_class.__module__)}")
    options = parser.parse_args(own)  # an unknown argument: "prog: error: unrecognized arguments", exit 2
    if options.help:
        print(node_help(node_class, prog))
        raise SystemExit(0)
    return ros


def run_node(node_class: Callable[[], Any], argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Check the command line, then spin one ``node_class()`` until SIGINT / SIGTERM: exit code 0, or 2 with one
    line if the arguments or the node's parameters are refused."""
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

    args = sys.argv[1:] if argv is None else list(argv)
    name: str = prog or os.path.basename(sys.argv[0]) or str(getattr(node_class, "__name__", "node"))
    ros = parse_node_arguments(node_class, args, name) if isinstance(node_class, type) else args
    refused: tuple[type[Exception], ...] = (*STARTUP_ERRORS, InvalidParameterTypeException,
                                            InvalidParameterValueException)
    def make() -> list[Any]:
        node = node_class()
        warn_unknown_parameters(node)  # a misspelled -p (widht:=640) does nothing: say so, with the closest name
        return [node]

    try:
        return run_nodes(make, args=[sys.argv[0], *ros])
    except refused as exc:
        print(f"{getattr(node_class, '__name__', name)}: {exc}", file=sys.stderr)
        return 2
