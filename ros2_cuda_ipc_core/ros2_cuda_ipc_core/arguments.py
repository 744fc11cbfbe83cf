"""argparse types the command-line tools share: a refused value is one line naming what is allowed.

``choices=range(1, 101)`` would list all hundred values in its error; :func:`bounded_number` says ``1..100``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["bounded_number"]


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
