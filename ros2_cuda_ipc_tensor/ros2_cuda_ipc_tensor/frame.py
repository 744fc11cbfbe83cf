"""``TensorFrame``: a borrowed, writable tensor in a pool block, published in place (maybe a smaller batch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ros2_cuda_ipc_core import BlockPublisher, PublishBlock, StreamLike, TypedFrame
from ros2_cuda_ipc_msgs.msg import GpuTensor

from .layout import TensorLayout
from .tensor_array import TensorArray


class TensorFrame(TypedFrame[TensorLayout, GpuTensor], TensorArray):
    """A tensor to fill (DLPack, CUDA array interface, numpy), then ``publish()``: the publisher's capacity, or
    the batch asked for at ``borrow(shape=...)``.

    Leaving a ``with`` block unpublished gives the block back.
    """

    array_name = "tensor frame"

    def __init__(self, publisher: BlockPublisher[TensorLayout, GpuTensor], block: PublishBlock, layout: TensorLayout) -> None:
        super().__init__(publisher, block, layout)
        self.array: Any = block.view(layout.shape, layout.dtype, layout.strides, layout.offset)

    def publish(self, stream: StreamLike = None, header: Any = None, *, shape: Sequence[int] | None = None) -> GpuTensor:
        """Publish once ``stream``'s work so far is done; ``shape`` may say a smaller leading dimension than the
        frame's (a batch of fewer: the first ``shape[0]`` entries are sent)."""
        layout = self.layout if shape is None else self.layout.with_batch(shape)
        return self.publisher.publish_block(self.block, layout, stream, header)
