"""Row and strided copies between any two addresses this process can reach: host or CUDA, one call either way.

The typed packages use them for their single upload (``publish_array``, the sensor_msgs bridges),
their single download, and to copy one strided array (a point-cloud field, say) into a dense one.
CUDA copies are ``cuMemcpy2DAsync`` (``cuMemcpyAsync`` for one dense span) with unified addressing,
ordered on the caller's stream, and wait for it, since either side may be the caller's host memory
(``wait=False`` leaves that to the caller, for a download into pinned memory that it waits for later).
Host copies are numpy strided assignments.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Sequence

import numpy as np

from .cuda_driver import driver_call
from .streams import StreamLike, stream_handle


def copy_rows(dst: int, dst_pitch: int, src: int, src_pitch: int, row_bytes: int, rows: int,
              cuda_device: int | None = None, stream: StreamLike = None, *, wait: bool = True) -> None:
    """Copy ``rows`` rows of ``row_bytes`` bytes; ``cuda_device`` None means both sides are host memory.

    ``wait=False``: a CUDA copy is only enqueued on ``stream`` (both sides must stay valid until it is done).
    """
    if row_bytes > min(dst_pitch, src_pitch) and rows > 1:
        raise ValueError(f"rows of {row_bytes} bytes do not fit pitches {dst_pitch} / {src_pitch}")
    copy_strided(dst, (dst_pitch,), src, (src_pitch,), (rows,), row_bytes, cuda_device, stream, wait=wait)


def copy_strided(dst: int, dst_strides: Sequence[int], src: int, src_strides: Sequence[int], shape: Sequence[int],
                 element_bytes: int, cuda_device: int | None = None, stream: StreamLike = None, *,
                 wait: bool = True) -> None:
    """Copy a ``shape`` grid of ``element_bytes``-byte elements, byte-strided on both sides.

    Axes dense on both sides are merged first, so a row-packed image or one field of an unpadded point
    cloud (one element per point, ``point_step`` apart) is a single 2D copy; other outer axes loop.
    ``cuda_device`` None means both sides are host memory.  Strides must be non-negative.  ``wait=False``
    enqueues a CUDA copy on ``stream`` without waiting for it.
    """
    if not len(dst_strides) == len(src_strides) == len(shape):
        raise ValueError(f"shape {tuple(shape)} and strides {tuple(dst_strides)} / {tuple(src_strides)} differ in length")
    if any(s < 0 for s in (*dst_strides, *src_strides)) or element_bytes <= 0:
        raise ValueError("strides must be non-negative and elements at least one byte")
    if 0 in shape:
        return
    axes, element_bytes = _merge_axes(shape, dst_strides, src_strides, element_bytes)
    if axes and (axes[-1][1] < element_bytes or axes[-1][2] < element_bytes):
        raise ValueError(f"elements of {element_bytes} bytes overlap at strides {axes[-1][1]} / {axes[-1][2]}")
    if cuda_device is None:
        _copy_host(dst, src, axes, element_bytes)
    else:
        _copy_cuda(dst, src, axes, element_bytes, cuda_device, stream, wait)


def _merge_axes(shape: Sequence[int], dst_strides: Sequence[int], src_strides: Sequence[int],
                element_bytes: int) -> tuple[list[tuple[int, int, int]], int]:
    """(extent, dst stride, src stride) of the axes left once dense inner axes join the element and
    neighbouring axes that are contiguous on both sides are merged."""
    axes = [(int(n), int(d), int(s)) for n, d, s in zip(shape, dst_strides, src_strides, strict=True) if n != 1]
    while axes and axes[-1][1] == axes[-1][2] == element_bytes:
        element_bytes *= axes.pop()[0]
    merged: list[tuple[int, int, int]] = []
    for extent, dst_stride, src_stride in axes:
        if merged and merged[-1][1] == dst_stride * extent and merged[-1][2] == src_stride * extent:
            merged[-1] = (merged[-1][0] * extent, dst_stride, src_stride)
        else:
            merged.append((extent, dst_stride, src_stride))
    return merged, element_bytes


def _bytes_at(address: int, axes: list[tuple[int, int, int]], side: int, element_bytes: int) -> np.ndarray:
    """A uint8 numpy view of one side's strided elements at a raw host address."""
    span = sum((axis[0] - 1) * axis[side] for axis in axes)
    raw = (ctypes.c_uint8 * (span + element_bytes)).from_address(address)
    return np.lib.stride_tricks.as_strided(np.ctypeslib.as_array(raw),
                                           [a[0] for a in axes] + [element_bytes], [a[side] for a in axes] + [1])


def _copy_host(dst: int, src: int, axes: list[tuple[int, int, int]], element_bytes: int) -> None:
    if not axes:
        ctypes.memmove(dst, src, element_bytes)
        return
    np.copyto(_bytes_at(dst, axes, 1, element_bytes), _bytes_at(src, axes, 2, element_bytes))


def _copy_cuda(dst: int, src: int, axes: list[tuple[int, int, int]], element_bytes: int, cuda_device: int,
               stream: StreamLike, wait: bool) -> None:
    from cuda.bindings import driver as cu

    from .cuda_context import on_device

    handle = stream_handle(stream)
    if not axes:  # one dense span: a plain copy, free of the 2D copy's pitch limit
        with on_device(cuda_device):
            driver_call(cu.cuMemcpyAsync, dst, src, element_bytes, handle)
            if wait:
                driver_call(cu.cuStreamSynchronize, handle)
        return
    rows, dst_pitch, src_pitch = axes[-1]
    copy = cu.CUDA_MEMCPY2D()
    copy.srcMemoryType = copy.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED
    copy.srcPitch, copy.dstPitch = src_pitch, dst_pitch
    copy.WidthInBytes, copy.Height = element_bytes, rows
    with on_device(cuda_device):
        for index in itertools.product(*(range(extent) for extent, _, _ in axes[:-1])):
            copy.dstDevice = dst + sum(i * d for i, (_, d, _) in zip(index, axes, strict=False))
            copy.srcDevice = src + sum(i * s for i, (_, _, s) in zip(index, axes, strict=False))
            driver_call(cu.cuMemcpy2DAsync, copy, handle)
        if wait:
            driver_call(cu.cuStreamSynchronize, handle)
