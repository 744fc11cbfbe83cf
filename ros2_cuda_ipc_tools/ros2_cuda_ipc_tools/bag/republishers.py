"""What the player does with one topic: ``Image`` and ``PointCloud2`` into pools as ``GpuImage`` /
``GpuPointCloud2`` through the typed publishers, anything else republished as its bytes are.

A pool is sized from the first message and made again when a message's geometry differs.  Every field of
a bag message is hostile: it is parsed where it lies (:mod:`.cdr_frames`: every length checked against
the bytes there are, the payload a view, never a copy), refused past ``max_frame_bytes`` (the bridges'
limit, ``check_frame_bytes``), and its geometry checked against the bytes it carries before any pool is
sized by it.  The payload then goes into a block in one upload (:mod:`.uploads`).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from std_msgs.msg import Header

from ros2_cuda_ipc_core import DEFAULT_MAX_FRAME_BYTES, InvalidDescriptorError, MemoryKind, check_frame_bytes
from ros2_cuda_ipc_image import ImagePublisher, encoding_layout
from ros2_cuda_ipc_pointcloud import CloudLayout, PointCloudPublisher, publish_pointcloud2_msg

from .cdr_frames import CdrStamp, ParsedCloud, ParsedImage, parse_cloud, parse_image
from .uploads import Upload

__all__ = ["CloudRepublisher", "ImageRepublisher", "RawRepublisher", "Republisher"]

_QOS = 100


def ros_header(stamp: CdrStamp) -> Header:
    return Header(stamp=Time(sec=stamp.sec, nanosec=stamp.nanosec), frame_id=stamp.frame_id)


class Republisher:
    """One output topic; :meth:`publish` returns False when the message was dropped (no free block)."""

    def __init__(self, node: Any, topic: str) -> None:
        self.node = node
        self.topic = topic

    def subscription_count(self) -> int:
        """Subscriptions matched with this topic's publisher now."""
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

    def __init__(self, node: Any, topic: str, memory: MemoryKind, block_count: int, upload: Upload,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        super().__init__(node, topic)
        self.memory, self.block_count = memory, block_count
        self.upload = upload
        self.max_frame_bytes = max_frame_bytes
        self.publisher: Any = None
        self.pools_made = 0
        self._geometry: Any = None

    def subscription_count(self) -> int:
        return 0 if self.publisher is None else int(self.publisher.subscription_count)

    def prepare(self, data: bytes) -> None:
        """Size the pool from a message before playing, so subscribers can match it before the first frame."""
        self._publisher_for(self._message(data))

    def _message(self, data: bytes) -> Any:
        check_frame_bytes(len(data), self.max_frame_bytes, f"a {self.topic} message")
        message = self.parse(data)
        check_frame_bytes(self.claimed_bytes(message), self.max_frame_bytes, f"a {self.topic} message")
        return message

    def _publisher_for(self, message: Any) -> Any:
        geometry = self.geometry(message)
        if self.publisher is None or geometry != self._geometry:
            publisher = self.make_publisher(message)
            if self.publisher is not None:
                self.publisher.close()
            self.publisher, self._geometry = publisher, geometry
            self.pools_made += 1
        return self.publisher

    def publish(self, data: bytes) -> bool:
        message = self._message(data)
        return self.send(self._publisher_for(message), message) is not None

    def parse(self, data: bytes) -> Any:
        raise NotImplementedError

    def claimed_bytes(self, message: Any) -> int:
        """The bytes the message's geometry claims (what a pool would be sized by)."""
        raise NotImplementedError

    def geometry(self, message: Any) -> Any:
        raise NotImplementedError

    def make_publisher(self, message: Any) -> Any:
        raise NotImplementedError

    def send(self, publisher: Any, message: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
            self.publisher = None


class ImageRepublisher(_PoolRepublisher):
    """``sensor_msgs/Image`` into ``GpuImage`` pools (rows as the bag has them, ``step`` kept)."""

    def parse(self, data: bytes) -> ParsedImage:
        return parse_image(data)

    def claimed_bytes(self, image: ParsedImage) -> int:
        return image.height * image.step

    def geometry(self, image: ParsedImage) -> Any:
        return image.height, image.width, image.encoding, image.step

    def make_publisher(self, image: ParsedImage) -> ImagePublisher:
        dtype, channels = encoding_layout(image.encoding)
        if image.height == 0 or image.width == 0 or image.step < image.width * channels * dtype.itemsize \
                or len(image.data) < image.height * image.step:
            raise InvalidDescriptorError(f"a {image.width}x{image.height} {image.encoding} image with step "
                                         f"{image.step} carries {len(image.data)} bytes")
        return ImagePublisher(self.node, self.topic, width=image.width, height=image.height, encoding=image.encoding,
                              row_stride=image.step, block_count=self.block_count, memory=self.memory, qos=_QOS)

    def send(self, publisher: ImagePublisher, image: ParsedImage) -> Any:
        data = image.data[: image.height * image.step]
        dtype, _ = encoding_layout(image.encoding)
        if image.is_bigendian != (sys.byteorder == "big") and dtype.itemsize > 1:  # GpuImage has no byte order
            data = memoryview(np.frombuffer(data, dtype=dtype.newbyteorder(">")).astype(dtype).tobytes())
        publisher.layout.validate(len(data))
        return self.upload(publisher, publisher.layout, data, ros_header(image.header))


class CloudRepublisher(_PoolRepublisher):
    """``sensor_msgs/PointCloud2`` into ``GpuPointCloud2`` pools (the bytes, fields and padding as they are)."""

    def parse(self, data: bytes) -> ParsedCloud:
        return parse_cloud(data)

    def claimed_bytes(self, cloud: ParsedCloud) -> int:
        return cloud.height * cloud.row_step

    def geometry(self, cloud: ParsedCloud) -> Any:
        return CloudLayout.from_message(cloud)

    def make_publisher(self, cloud: ParsedCloud) -> PointCloudPublisher:
        layout = CloudLayout.from_message(cloud).validate(len(cloud.data))
        if layout.point_count == 0:
            raise InvalidDescriptorError("an empty cloud sizes no pool")
        return PointCloudPublisher(self.node, self.topic, fields=list(cloud.fields), width=layout.width,
                                   height=layout.height, point_step=layout.point_step, row_step=layout.row_step,
                                   block_count=self.block_count, memory=self.memory, qos=_QOS)

    def send(self, publisher: PointCloudPublisher, cloud: ParsedCloud) -> Any:
        given = CloudLayout.from_message(cloud).validate(len(cloud.data))
        mine = publisher.layout
        if (given.fields, given.point_step, given.is_bigendian) != (mine.fields, mine.point_step, mine.is_bigendian):
            # Another byte order than the pool's: repacked on the host by the bridge's conversion.
            return publish_pointcloud2_msg(publisher, _CloudMessage(cloud))
        return self.upload(publisher, given, cloud.data[: min(len(cloud.data), given.data_size)],
                           ros_header(cloud.header))


class _CloudMessage:
    """A parsed cloud with a ROS header: what the bridge's conversion reads of a PointCloud2."""

    def __init__(self, cloud: ParsedCloud) -> None:
        self.header = ros_header(cloud.header)
        self.height, self.width, self.fields = cloud.height, cloud.width, cloud.fields
        self.is_bigendian, self.point_step, self.row_step = cloud.is_bigendian, cloud.point_step, cloud.row_step
        self.data, self.is_dense = cloud.data, cloud.is_dense
