"""One strided copy between an array placed in a block and any user array (numpy, DLPack, CAI; host or device)."""

from __future__ import annotations

from typing import Any

from ..memory.streams import StreamLike
from ..memory.transfer import copy_strided
from .layout import StridedLayout
from .source import StridedSource, strided_source


def copy_block_array(block_address: int, block_memory: str, block_device: int, layout: StridedLayout, array: Any,
                     stream: StreamLike, into_block: bool) -> None:
    """Copy between the array ``layout`` places at ``block_address`` and ``array`` (same shape and dtype; a
    :class:`StridedSource` already made of it will do).

    The block's bytes the layout covers must already be checked against its size.  CUDA copies are
    complete when this returns.
    """
    user = array if isinstance(array, StridedSource) else strided_source(array)
    if (user.layout.shape, user.layout.dtype, user.layout.element) != (layout.shape, layout.dtype, layout.element):
        raise ValueError(f"the given array is {user.layout.shape} {user.layout.element or user.layout.dtype}, the "
                         f"block's is {layout.shape} {layout.element or layout.dtype}")
    if user.readonly and not into_block:
        raise ValueError("the destination array is read-only")
    if block_memory == "cuda":
        cuda: int | None = block_device
    else:
        cuda = (user.device_id or 0) if user.on_device else None
    placed = block_address + layout.offset
    if into_block:
        copy_strided(placed, layout.strides, user.address, user.layout.strides, layout.shape, layout.dtype.itemsize,
                     cuda, stream)
    else:
        copy_strided(user.address, user.layout.strides, placed, layout.strides, layout.shape, layout.dtype.itemsize,
                     cuda, stream)
