"""``ImageReader``: ``GpuImage`` messages to leased, typed image views."""

from __future__ import annotations

from collections.abc import Iterable

from ros2_cuda_ipc_core import InvalidDescriptorError, Reader
from ros2_cuda_ipc_core.streams import StreamLike, stream_handle
from ros2_cuda_ipc_msgs.msg import GpuImage

from .layout import ImageLayout
from .view import ImageView


class ImageReader:
    """Reads ``GpuImage`` messages; share one ``Reader`` between typed readers to share pool imports."""

    def __init__(self, reader: Reader | None = None, allowed_uids: Iterable[int] | None = None) -> None:
        self.reader = reader if reader is not None else Reader(allowed_uids=allowed_uids)

    def read(self, msg: GpuImage, stream: StreamLike = None) -> ImageView:
        """Validate the image metadata (before any lease), then lease and view it, ordered on ``stream``."""
        try:
            layout = ImageLayout.from_message(msg)
        except InvalidDescriptorError:
            self.reader.counters.add("invalid_descriptors")
            raise
        handle = self.reader.read(msg.core, stream)
        try:
            return ImageView(handle, layout, msg.header, stream_handle(stream))
        except BaseException:
            handle.close()
            raise

    def stats(self) -> dict[str, int]:
        return self.reader.stats()
