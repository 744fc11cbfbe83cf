"""Command-line arguments the tools share: a refused value is one line naming what is allowed.

``choices=range(1, 101)`` would list all hundred values in its error; :func:`bounded_number` says ``1..100``.
:func:`topic_name` refuses a name ROS would refuse later with a traceback, and :func:`check_ros_arguments`
turns what rcl cannot parse after ``--ros-args`` into one line (:class:`RosArgumentsError`) before ``rclpy.init``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["RosArgumentsError", "bounded_number", "check_ros_arguments", "topic_name"]


def bounded_number(kind: type, low: float, high: float) -> Callable[[str], Any]:
    """An argparse ``type``: a ``kind`` (int or float) number from ``low`` to ``high``, both included (NaN is not).

    ``--jpeg-quality 0`` is then ``argument --jpeg-quality: 0 is outside 1..100``; ``ten``, ``'ten' is not an
    integer``."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low:g}..{high:g}")
        return value

    parse.__name__ = f"{kind.__name__} in {low:g}..{high:g}"
    return parse


class RosArgumentsError(ValueError):
    """``--ros-args`` that rcl cannot parse (``-p width`` without a value, a missing ``--params-file``, a remapping
    to a name ROS refuses); the message is one line naming the argument, without rcl's source positions."""


_KEPT_BYTES = 1 << 16  # of rcl's lines beside good arguments, written out
_RCL_AT = ", at /"  # rcl's "..., at /project/src/rcl/arguments.c:352" positions begin so
_SHOWN = 240  # characters of rcl's echo of an argument that the one line shows
_HINTS = {"parameter override rule": "-p takes NAME:=VALUE",
          "remap rule": "-r takes FROM:=TO, both valid ROS names (__ns:= an absolute namespace: /cameras)",
          "log level": "--log-level takes debug, info, warn, error or fatal (or NAME:=LEVEL)"}


def _rcl_argument_message(text: str) -> str:
    """rcl's error as one line: what it could not parse (at most :data:`_SHOWN` characters of it), why where rcl says
    it in words, and what it takes.  Linear in the text: rcl echoes the argument, which may be anything."""
    first = text.split("\n", 1)[0].removeprefix("Failed to parse ROS arguments: ") or "rcl refused them"
    what, _, why = first.partition(". Error: ")
    what, why = what.split(_RCL_AT, 1)[0], why.split(_RCL_AT, 1)[0]  # rcl's source positions: of no use here
    cryptic = not why or "lexeme" in why or why.startswith("error not set")
    hint = next((hint for key, hint in _HINTS.items() if key in what), "")
    what = what if len(what) <= _SHOWN else f"{what[:_SHOWN]}..."
    return "; ".join(part for part in (what, "" if cryptic else why[:_SHOWN], hint) if part)


def check_ros_arguments(args: Sequence[str]) -> list[str]:
    """The command line ``args`` less its ROS arguments; :class:`RosArgumentsError` (one line) where rcl refuses
    them, checked before ``rclpy.init`` so that a typo costs no traceback and no half-started process."""
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    from rclpy.utilities import remove_ros_args

    with _stderr_kept() as kept:  # rcl logs its own lines ("Namespace not remapped ...") beside the error
        try:
            rest = list(remove_ros_args(list(args)))
        except _rclpy.UnknownROSArgsError as exc:
            unknown = str(exc) if len(str(exc)) <= _SHOWN else f"{str(exc)[:_SHOWN]}..."
            raise RosArgumentsError(f"--ros-args: not ROS arguments: {unknown} (a value with spaces needs quotes)") \
                from None
        except _rclpy.RCLError as exc:
            raise RosArgumentsError(f"--ros-args: {_rcl_argument_message(str(exc))}") from None
        kept.append(True)
    return rest


@contextmanager
def _stderr_kept() -> Iterator[list[bool]]:
    """Within the block, what C code writes to stderr goes to a file; it is written out after the block only when
    the list it yields was appended to (the arguments were good), else dropped with the refusal it came with."""
    kept: list[bool] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield kept
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if kept:
                caught.seek(0)
                os.write(2, caught.read(_KEPT_BYTES))


def topic_name(text: str) -> str:
    """An argparse ``type``: a topic name ROS accepts (relative, absolute or ``~/private``), else one line saying why."""
    from rclpy.exceptions import InvalidTopicNameException
    from rclpy.validate_topic_name import validate_topic_name

    try:
        validate_topic_name(text)
    except InvalidTopicNameException as exc:
        reason = str(exc).splitlines()[0].removeprefix("Invalid topic name: ").rstrip(":")
        raise argparse.ArgumentTypeError(f"{text!r} is not a topic name: {reason}") from None
    return text
