"""``ImageSubscription``: every image of a ``GpuImage`` topic as an ``ImageView``, zero-copy or through its CPU twin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sensor_msgs.msg import Image

from ros2_cuda_ipc_core import DeliveryMode, FallbackMode, MemoryKind, StreamLike, TwinUpload, TypedSubscription
from ros2_cuda_ipc_msgs.msg import GpuImage

from .publisher import ImagePublisher, publish_image_msg
from .reader import ImageReader
from .view import ImageView


def image_fits(publisher: ImagePublisher, msg: Image) -> bool:
    """Whether ``publisher`` publishes images of ``msg``'s geometry, encoding and row step."""
    layout = publisher.layout
    return (layout.shape[:2], layout.encoding, layout.strides[0]) == ((msg.height, msg.width), msg.encoding, msg.step)


class ImageTwinUpload(TwinUpload[ImagePublisher]):
    """``sensor_msgs/Image`` twins into local image blocks (one upload each), sized by the first and resized on change."""

    message_type = Image

    def fits(self, publisher: ImagePublisher, msg: Image) -> bool:
        return image_fits(publisher, msg)

    def make_publisher(self, msg: Image, memory: MemoryKind) -> ImagePublisher:
        return ImagePublisher(None, "", width=msg.width, height=msg.height, encoding=msg.encoding, row_stride=msg.step,
                              block_count=self.block_count, memory=memory, reuse_delay=0.0, fallback=False)

    def upload(self, publisher: ImagePublisher, msg: Image) -> GpuImage | None:
        return publish_image_msg(publisher, msg)


class ImageSubscription(TypedSubscription[ImageView]):
    """``callback(view)`` once per image on ``topic``: an ``ImageView`` whichever way the frame came.

    A publisher whose pool this process can map is read zero-copy; one it cannot (another host, network
    namespace or user; no CUDA here) through its ``sensor_msgs/Image`` twin, said once in the log, unless
    ``fallback="never"``.  ``memory`` is where fallback frames land ("auto", "host", "cuda"); ``stats()``
    counts frames by path and reason.  ``fallback_topic``: the twin's name if the publisher renamed it.
    ``delivery="direct"``: the callback runs on the subscription's own thread as soon as a frame arrives on the
    pool's connection, outside the executor (it must be thread-safe; see ``TypedSubscription``).
    """

    def __init__(self, node: Any, topic: str, callback: Callable[[ImageView], None], qos: Any = 10, *,
                 fallback: FallbackMode = "auto", memory: MemoryKind = "auto", stream: StreamLike = None,
                 fallback_topic: str | None = None, reader: ImageReader | None = None,
                 delivery: DeliveryMode = "executor") -> None:
        super().__init__(node, topic, GpuImage, reader or ImageReader(), ImageTwinUpload(), callback, qos,
                         fallback=fallback, memory=memory, stream=stream, fallback_topic=fallback_topic,
                         delivery=delivery)
