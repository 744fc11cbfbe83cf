"""What the player does with one topic: ``Image`` and ``PointCloud2`` into pools as ``GpuImage`` /
``GpuPointCloud2`` through the typed publishers, anything else republished as its bytes are.

A pool is sized from the first message and made again when a message's geometry differs.  Every field of
a bag message is hostile: a message is deserialized by rclpy (which refuses lengths beyond its bytes) and
its geometry checked against the bytes it carries before any pool is sized by it.
"""

from __future__ import annotations

from typing import Any

from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image, PointCloud2

from ros2_cuda_ipc_core import InvalidDescriptorError, MemoryKind
from ros2_cuda_ipc_image import ImagePublisher, encoding_layout, publish_image_msg
from ros2_cuda_ipc_pointcloud import CloudLayout, PointCloudPublisher, publish_pointcloud2_msg

__all__ = ["CloudRepublisher", "ImageRepublisher", "RawRepublisher", "Republisher"]

_QOS = 100


class Republisher:
    """One output topic; :meth:`publish` returns False when the message was dropped (no free block)."""

    def __init__(self, node: Any, topic: str) -> None:
        self.node = node
        self.topic = topic

    def subscription_count(self) -> int:
        raise NotImplementedError

    def publish(self, data: bytes) -> bool:
        """Publish one bag message (its CDR bytes); InvalidDescriptorError / ValueError for one that cannot be."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class RawRepublisher(Republisher):
    """A topic of any other type: its bytes published as they are (rclpy takes serialized messages)."""

    def __init__(self, node: Any, topic: str, message_class: type) -> None:
        super().__init__(node, topic)
        self._publisher = node.create_publisher(message_class, topic, _QOS)

    def subscription_count(self) -> int:
        return int(self._publisher.get_subscription_count())

    def publish(self, data: bytes) -> bool:
        self._publisher.publish(data)
        return True

    def close(self) -> None:
        self.node.destroy_publisher(self._publisher)


class _PoolRepublisher(Republisher):
    """A typed publisher re-made whenever a message's geometry (:meth:`geometry`) changes."""

    message_class: type = Image

    def __init__(self, node: Any, topic: str, memory: MemoryKind, block_count: int) -> None:
        super().__init__(node, topic)
        self.memory, self.block_count = memory, block_count
        self.publisher: Any = None
        self.pools_made = 0
        self._geometry: Any = None

    def subscription_count(self) -> int:
        return 0 if self.publisher is None else int(self.publisher.subscription_count)

    def prepare(self, data: bytes) -> None:
        """Size the pool from a message before playing, so subscribers can match it before the first frame."""
        self._publisher_for(self._message(data))

    def _message(self, data: bytes) -> Any:
        try:
            return deserialize_message(data, self.message_class)
        except Exception as exc:  # rclpy's RMWError for bytes that are not this message
            raise InvalidDescriptorError(f"a {self.message_class.__name__} that cannot be deserialized: {exc}") \
                from None

    def _publisher_for(self, msg: Any) -> Any:
        geometry = self.geometry(msg)
        if self.publisher is None or geometry != self._geometry:
            publisher = self.make_publisher(msg)
            if self.publisher is not None:
                self.publisher.close()
            self.publisher, self._geometry = publisher, geometry
            self.pools_made += 1
        return self.publisher

    def publish(self, data: bytes) -> bool:
        msg = self._message(data)
        return self.upload(self._publisher_for(msg), msg) is not None

    def geometry(self, msg: Any) -> Any:
        raise NotImplementedError

    def make_publisher(self, msg: Any) -> Any:
        raise NotImplementedError

    def upload(self, publisher: Any, msg: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
            self.publisher = None


class ImageRepublisher(_PoolRepublisher):
    """``sensor_msgs/Image`` into ``GpuImage`` pools (rows as the bag has them, ``step`` kept)."""

    message_class = Image

    def geometry(self, msg: Image) -> Any:
        return msg.height, msg.width, msg.encoding, msg.step

    def make_publisher(self, msg: Image) -> ImagePublisher:
        dtype, channels = encoding_layout(msg.encoding)
        if msg.height == 0 or msg.width == 0 or msg.step < msg.width * channels * dtype.itemsize \
                or len(msg.data) < msg.height * msg.step:
            raise InvalidDescriptorError(f"a {msg.width}x{msg.height} {msg.encoding} image with step {msg.step} "
                                         f"carries {len(msg.data)} bytes")
        return ImagePublisher(self.node, self.topic, width=msg.width, height=msg.height, encoding=msg.encoding,
                              row_stride=msg.step, block_count=self.block_count, memory=self.memory, qos=_QOS)

    def upload(self, publisher: ImagePublisher, msg: Image) -> Any:
        return publish_image_msg(publisher, msg)


class CloudRepublisher(_PoolRepublisher):
    """``sensor_msgs/PointCloud2`` into ``GpuPointCloud2`` pools (the bytes, fields and padding as they are)."""

    message_class = PointCloud2

    def geometry(self, msg: PointCloud2) -> Any:
        return CloudLayout.from_message(msg)

    def make_publisher(self, msg: PointCloud2) -> PointCloudPublisher:
        cloud = CloudLayout.from_message(msg).validate(len(msg.data))
        if cloud.point_count == 0:
            raise InvalidDescriptorError("an empty cloud sizes no pool")
        return PointCloudPublisher(self.node, self.topic, fields=list(msg.fields), width=cloud.width,
                                   height=cloud.height, point_step=cloud.point_step, row_step=cloud.row_step,
                                   block_count=self.block_count, memory=self.memory, qos=_QOS)

    def upload(self, publisher: PointCloudPublisher, msg: PointCloud2) -> Any:
        return publish_pointcloud2_msg(publisher, msg)
