"""Row copies between any two addresses this process can reach: host or CUDA, one call either way.

The typed packages use it for their single upload (``publish_array``, ``publish_image_msg``) and
single download (``to_image_msg``).  CUDA copies go through ``cuMemcpy2DAsync`` with unified
addressing, ordered on the caller's stream, and wait for it, since the host buffer is the caller's.
"""

from __future__ import annotations

import ctypes

from .cuda_driver import driver_call
from .streams import StreamLike, stream_handle


def copy_rows(dst: int, dst_pitch: int, src: int, src_pitch: int, row_bytes: int, rows: int,
              cuda_device: int | None = None, stream: StreamLike = None) -> None:
    """Copy ``rows`` rows of ``row_bytes`` bytes; ``cuda_device`` None means both sides are host memory."""
    if row_bytes > min(dst_pitch, src_pitch) and rows > 1:
        raise ValueError(f"rows of {row_bytes} bytes do not fit pitches {dst_pitch} / {src_pitch}")
    if cuda_device is None:
        if dst_pitch == src_pitch == row_bytes:
            ctypes.memmove(dst, src, row_bytes * rows)
        else:
            for row in range(rows):
                ctypes.memmove(dst + row * dst_pitch, src + row * src_pitch, row_bytes)
        return
    from cuda.bindings import driver as cu

    from .cuda_context import on_device

    copy = cu.CUDA_MEMCPY2D()
    copy.srcMemoryType = copy.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED
    copy.srcDevice, copy.srcPitch = src, src_pitch
    copy.dstDevice, copy.dstPitch = dst, dst_pitch
    copy.WidthInBytes, copy.Height = row_bytes, rows
    handle = stream_handle(stream)
    with on_device(cuda_device):
        driver_call(cu.cuMemcpy2DAsync, copy, handle)
        driver_call(cu.cuStreamSynchronize, handle)
