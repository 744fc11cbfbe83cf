"""``ImageFrame``: a borrowed, writable image in a pool block, published in place."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ros2_cuda_ipc_core import PublishBlock
from ros2_cuda_ipc_core.streams import StreamLike
from ros2_cuda_ipc_msgs.msg import GpuImage

from .array_protocols import ImageArrayProtocols
from .layout import ImageLayout

if TYPE_CHECKING:
    from .publisher import ImagePublisher


class ImageFrame(ImageArrayProtocols):
    """A (rows, cols, channels) image to fill: numpy for host memory, DLPack / CUDA-array-interface for CUDA.

    ``publish()`` sends it; leaving a ``with`` block unpublished gives the block back.
    """

    def __init__(self, publisher: ImagePublisher, block: PublishBlock, layout: ImageLayout) -> None:
        self._publisher = publisher
        self._block = block
        self.layout = layout
        self.array: Any = block.view(layout.shape, layout.dtype, layout.strides)

    @property
    def device_ptr(self) -> int:
        return self._block.device_ptr

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self.array.__array__(dtype) if dtype is not None else self.array.__array__()

    def publish(self, stream: StreamLike = None, header: Any = None) -> GpuImage:
        """Publish once ``stream``'s work so far is done; returns the message sent."""
        return self._publisher._publish(self._block, self.layout, stream, header)

    def cancel(self) -> None:
        self._block.cancel()

    def __enter__(self) -> ImageFrame:
        return self

    def __exit__(self, *exc: object) -> None:
        self._block.cancel()
