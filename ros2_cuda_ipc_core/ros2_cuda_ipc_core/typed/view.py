"""``TypedView``: a leased, read-only block holding one typed message's payload, and views of arrays in it."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ..memory.streams import StreamLike
from ..pool.read_handle import ReadHandle
from .arrays import ArrayView
from .copies import copy_block_array
from .layout import BlockLayout, StridedLayout

L = TypeVar("L", bound=BlockLayout)
_View = TypeVar("_View", bound="TypedView[Any]")


class TypedView(Generic[L]):
    """What a typed reader returns.  The lease lives until the view is closed and every array view taken
    from it (and every tensor made from one of those) is gone; for CUDA, until ``stream`` is done with it."""

    def __init__(self, handle: ReadHandle, layout: L, header: Any, stream: int) -> None:
        self.handle = handle
        self.layout = layout
        self.header = header
        self.stream = stream  #: the raw CUstream the read was ordered on

    @property
    def memory(self) -> str:
        """'host' or 'cuda'."""
        return self.handle.memory

    @property
    def closed(self) -> bool:
        return self.handle.closed

    def array_view(self, layout: StridedLayout, name: str = "array") -> ArrayView:
        """A read-only view of the array ``layout`` places in the block; it holds the lease while it lives.

        ``name`` is what errors call it (a DLPack refusal for strides that are not whole elements, say).
        """
        array = self.handle.view(layout.shape, layout.dtype, layout.strides, layout.offset)
        return ArrayView(array, layout, name)

    def copy_out(self, layout: StridedLayout, out: Any, stream: StreamLike = None) -> None:
        """Copy the array ``layout`` places in the block into ``out`` in one strided copy.

        ``out`` is any writable numpy / DLPack / CUDA-array-interface array of the same shape and dtype
        (host or device, any strides); this is how a field that DLPack cannot take is made dense.  CUDA
        copies run on ``stream`` (default: the read's stream) and are complete when this returns.
        """
        copy_block_array(self.handle.device_ptr, self.memory, self.handle.device_id,
                         layout.validate(self.handle.byte_size), out, self.stream if stream is None else stream,
                         into_block=False)

    def close(self) -> None:
        """Give up the view's share of the lease (array views and tensors made from them keep theirs)."""
        self.handle.close()

    def __enter__(self: _View) -> _View:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
