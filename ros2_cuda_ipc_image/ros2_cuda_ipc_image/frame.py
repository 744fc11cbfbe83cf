"""``ImageFrame``: a borrowed, writable image in a pool block, published in place."""

from __future__ import annotations

from typing import Any

from ros2_cuda_ipc_core import ArrayProtocols, BlockPublisher, PublishBlock, TypedFrame
from ros2_cuda_ipc_msgs.msg import GpuImage

from .layout import ImageLayout


class ImageFrame(TypedFrame[ImageLayout, GpuImage], ArrayProtocols):
    """A (rows, cols, channels) image to fill: numpy for host memory, DLPack / CUDA-array-interface for CUDA.

    ``publish()`` sends it; leaving a ``with`` block unpublished gives the block back.
    """

    array_name = "image frame"

    def __init__(self, publisher: BlockPublisher[ImageLayout, GpuImage], block: PublishBlock, layout: ImageLayout) -> None:
        super().__init__(publisher, block, layout)
        self.array: Any = block.view(layout.shape, layout.dtype, layout.strides)

    @property
    def array_layout(self) -> ImageLayout:
        return self.layout

    @property
    def encoding(self) -> str:
        return self.layout.encoding
