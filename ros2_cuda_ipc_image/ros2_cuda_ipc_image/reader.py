"""``ImageReader``: ``GpuImage`` messages to leased, typed image views."""

from __future__ import annotations

from ros2_cuda_ipc_core import ReadHandle, TypedReader
from ros2_cuda_ipc_msgs.msg import GpuImage

from .layout import ImageLayout
from .view import ImageView


class ImageReader(TypedReader[ImageLayout, GpuImage, ImageView]):
    """Reads ``GpuImage`` messages; share one ``Reader`` between typed readers to share pool imports."""

    message_type = GpuImage

    def layout_of(self, msg: GpuImage) -> ImageLayout:
        return ImageLayout.from_message(msg)

    def view_of(self, handle: ReadHandle, layout: ImageLayout, msg: GpuImage, stream: int) -> ImageView:
        return ImageView(handle, layout, msg.header, stream)
