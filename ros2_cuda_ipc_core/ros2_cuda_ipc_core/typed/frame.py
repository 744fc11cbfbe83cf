"""``TypedFrame``: a borrowed, writable block holding one typed message's payload, published in place."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from ..memory.streams import StreamLike
from ..pool.block_manager import BlockManager
from ..pool.publish_block import PublishBlock
from .arrays import ArrayView
from .copies import copy_block_array
from .layout import BlockLayout, StridedLayout, TypedMessage

L = TypeVar("L", bound=BlockLayout)
M = TypeVar("M", bound=TypedMessage)
_Frame = TypeVar("_Frame", bound="TypedFrame[Any, Any]")
_L_contra = TypeVar("_L_contra", bound=BlockLayout, contravariant=True)
_M_co = TypeVar("_M_co", bound=TypedMessage, covariant=True)


class BlockPublisher(Protocol[_L_contra, _M_co]):
    """What a frame publishes through: its publisher (a :class:`TypedPublisher`, whose module imports this one)."""

    @property
    def pool(self) -> BlockManager: ...

    def publish_block(self, block: PublishBlock, layout: _L_contra | None = None, stream: StreamLike = None,
                      header: Any = None, byte_size: int | None = None) -> _M_co: ...


class TypedFrame(Generic[L, M]):
    """Fill it through :meth:`array_view` (or the raw :attr:`block`), then :meth:`publish` it.

    Leaving a ``with`` block unpublished gives the block back.
    """

    def __init__(self, publisher: BlockPublisher[L, M], block: PublishBlock, layout: L) -> None:
        self.publisher = publisher
        self.block = block
        self.layout = layout

    @property
    def device_ptr(self) -> int:
        """Address of the block's first byte (a device pointer for CUDA)."""
        return self.block.device_ptr

    @property
    def memory(self) -> str:
        return self.block.memory

    def array_view(self, layout: StridedLayout, name: str = "array") -> ArrayView:
        """A writable view of the array ``layout`` places in the block; ``name`` is what errors call it."""
        array = self.block.view(layout.shape, layout.dtype, layout.strides, layout.offset)
        return ArrayView(array, layout, name)

    def copy_in(self, layout: StridedLayout, source: Any, stream: StreamLike = None) -> None:
        """Copy ``source`` (any numpy / DLPack / CAI array of the layout's shape and dtype, host or device, any
        strides) into the array ``layout`` places in the block: one strided copy, complete when this returns."""
        self.block.view(layout.shape, layout.dtype, layout.strides, layout.offset)  # refuses a published block
        copy_block_array(self.block.device_ptr, self.memory, self.publisher.pool.device,
                         layout.validate(self.block.capacity), source, stream, into_block=True)

    def publish(self, stream: StreamLike = None, header: Any = None) -> M:
        """Publish once ``stream``'s work so far is done; returns the message sent."""
        return self.publisher.publish_block(self.block, self.layout, stream, header)

    def cancel(self) -> None:
        """Give the block back unpublished (nothing happens if it was published)."""
        self.block.cancel()

    def __enter__(self: _Frame) -> _Frame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.block.cancel()
