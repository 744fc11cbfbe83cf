"""What the two bag tools' command lines share: number arguments checked by argparse, and the one way they end
(a :class:`BagError` is one line on stderr and exit code 2; Ctrl-C / SIGTERM exit 0)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

from ros2_cuda_ipc_core import run_tool

from .bag_errors import BagError

__all__ = ["number_argument", "run_bag_tool"]


def number_argument(kind: type = float, minimum: float = 0.0, *, above: bool = False) -> Callable[[str], Any]:
    """An argparse ``type``: a finite ``kind`` number from ``minimum`` on (``above``: strictly more)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < minimum or (above and value == minimum):
            raise argparse.ArgumentTypeError(f"{text} must be a finite number {'above' if above else 'from'} "
                                             f"{minimum:g}")
        return value
    return parse


def run_bag_tool(prog: str, action: Callable[[], int]) -> int:
    """Run a bag tool's ``action``: its exit code, 2 (one line naming ``prog``) for a BagError, 0 on a stop signal."""
    def run() -> int:
        try:
            return action()
        except BagError as exc:
            print(f"{prog}: {' '.join(str(exc).split())}", file=sys.stderr)  # one line, whatever a library said
            return 2
    return run_tool(run)
