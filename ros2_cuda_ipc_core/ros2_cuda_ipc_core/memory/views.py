"""Layout checks and host views shared by every memory kind and by the typed packages."""

from __future__ import annotations

import functools
import math
import mmap
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidDescriptorError

#: Sizes numpy and DLPack hold: extents, strides and byte counts are int64 (numpy's intp on every 64-bit machine).
INT64_MAX = 2**63 - 1
#: Most dimensions a numpy array may have (NPY_MAXDIMS).
NUMPY_MAX_DIMS = 64


def beyond_array_limits(shape: Sequence[int], strides: Sequence[int], itemsize: int, offset: int = 0) -> str | None:
    """Why no array (numpy, DLPack) can have this layout, even an empty one, or None if one can.

    ``strides`` in bytes.  numpy refuses (with a ValueError that names no field) more than 64 dimensions, an
    extent or stride beyond int64, and more elements than int64 bytes, counting the extents that are not
    zero; and no byte of a view may lie beyond int64, however large its block claims to be.
    """
    if len(shape) > NUMPY_MAX_DIMS:
        return f"shape has {len(shape)} dimensions; an array has at most {NUMPY_MAX_DIMS}"
    for index, extent in enumerate(shape):
        if extent > INT64_MAX:
            return f"shape[{index}] is {extent}: beyond int64"
    count = math.prod(extent for extent in shape if extent)
    if count * itemsize > INT64_MAX:
        return (f"shape {tuple(shape)} is {count} elements of {itemsize} bytes (zero extents aside): beyond int64 "
                "bytes, which no array holds, even an empty one")
    for index, stride in enumerate(strides):
        if abs(stride) > INT64_MAX:
            return f"strides[{index}] is {stride} bytes: beyond int64"
    reach = offset + sum(max(0, extent - 1) * abs(stride) for extent, stride in zip(shape, strides, strict=True))
    if reach + itemsize > INT64_MAX:
        return (f"shape {tuple(shape)} with strides {tuple(strides)} (bytes) at offset {offset} reaches byte "
                f"{reach + itemsize}: beyond int64")
    return None


def contiguous_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Row-major (C) byte strides of ``shape``."""
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def check_layout(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int,
                 offset: int, limit: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Validate a strided layout against ``limit`` bytes; return (shape, strides) as int tuples.

    Python integers, so no product can overflow; every element must lie in ``[0, limit)``.  A reader
    asks for the same few layouts frame after frame: layouts of plain ints are remembered.
    """
    if (type(shape) is tuple and all(type(n) is int for n in shape) and type(offset) is int
            and (strides is None or (type(strides) is tuple and all(type(n) is int for n in strides)))):
        return _check_int_layout(shape, strides, itemsize, offset, limit)
    return _check_layout(shape, strides, itemsize, offset, limit)


@functools.lru_cache(maxsize=256)
def _check_int_layout(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int,
                      offset: int, limit: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return _check_layout(shape, strides, itemsize, offset, limit)


def _check_layout(shape: Sequence[int], strides: Sequence[int] | None, itemsize: int,
                  offset: int, limit: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    try:
        shape = tuple(operator.index(n) for n in shape)
        strides = contiguous_strides(shape, itemsize) if strides is None else tuple(operator.index(s) for s in strides)
        offset = operator.index(offset)
    except TypeError as exc:
        raise InvalidDescriptorError(f"shape, strides and offset must be integers: {exc}") from None
    if len(strides) != len(shape):
        raise InvalidDescriptorError(f"shape {shape} and strides {strides} differ in length")
    if any(n < 0 for n in shape):
        raise InvalidDescriptorError(f"shape {shape} has a negative extent")
    if offset < 0:
        raise InvalidDescriptorError(f"offset {offset} is negative")
    problem = beyond_array_limits(shape, strides, itemsize, offset)
    if problem is not None:  # numpy's own refusal would be a ValueError naming nothing
        raise InvalidDescriptorError(problem)
    if 0 in shape:
        return shape, strides
    low = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True))
    high = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True)) + itemsize
    if low < 0 or high > limit:
        raise InvalidDescriptorError(
            f"shape {shape} with strides {strides} at offset {offset} spans bytes [{low}, {high}), "
            f"outside the {limit} bytes available")
    return shape, strides


def host_array(buffer: mmap.mmap | np.ndarray, start: int, limit: int, shape: Sequence[int], dtype: Any,
               strides: Sequence[int] | None, offset: int = 0) -> np.ndarray:
    """A numpy view into the window ``buffer[start:start + limit]``, its first element ``offset`` bytes in."""
    element = np.dtype(dtype)
    shape, strides = check_layout(shape, strides, element.itemsize, offset, limit)
    return np.ndarray(shape, dtype=element, buffer=buffer, offset=start + offset, strides=strides)
