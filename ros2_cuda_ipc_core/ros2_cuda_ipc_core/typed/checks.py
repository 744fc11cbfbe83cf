"""The typed API's argument checks, shared by every typed package: a wrong argument is one clear error naming it.

Without them a caller's ``width="640"`` surfaced as ``'<=' not supported between instances of 'str' and 'int'``
from deep inside a constructor, and a reader handed another package's message complained of its fields.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..memory.cuda_driver import require_cuda

__all__ = ["check_count", "check_index", "check_integers", "check_message_type", "check_optional_count",
           "require_cuda_for"]


def _integer(name: str, value: object) -> int:
    """``value`` when it is an integer (numpy's too, bool not); TypeError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, not {type(value).__name__} ({value!r:.40})")
    return int(value)


def check_count(name: str, value: object, why: str = "") -> int:
    """A size or a count (``width``, ``block_count``): an int above 0; ``why`` ends the ValueError's message."""
    number = _integer(name, value)
    if number <= 0:
        raise ValueError(f"{name}={number} must be positive{why}")
    return number


def check_optional_count(name: str, value: object) -> int | None:
    """:func:`check_count`, None allowed (the default's marker)."""
    return None if value is None else check_count(name, value)


def check_index(name: str, value: object) -> int:
    """An index (a CUDA ``device``): an int, 0 or above."""
    number = _integer(name, value)
    if number < 0:
        raise ValueError(f"{name}={number} must be 0 or above")
    return number


def check_integers(name: str, values: object) -> tuple[int, ...]:
    """A tensor's ``shape`` or ``strides``: a sequence of ints (a string is none); TypeError naming the entry."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(f"{name} must be a sequence of ints, not {type(values).__name__} ({values!r:.40})")
    return tuple(_integer(f"{name}[{index}]", value) for index, value in enumerate(values))


def check_message_type(msg: object, expected: type, reader: str) -> None:
    """TypeError when ``msg`` is not an ``expected`` message: ``reader`` (the class whose ``read`` was called)
    takes no other."""
    if not isinstance(msg, expected):
        raise TypeError(f"{reader}.read: wrong message type: expected {expected.__name__}, got {type(msg).__name__}")


def require_cuda_for(memory: Any, device: int = 0) -> None:
    """``memory="cuda"`` where CUDA is not usable: the publishers' ``CudaUnavailableError``, at once."""
    if memory == "cuda":
        require_cuda(device)
