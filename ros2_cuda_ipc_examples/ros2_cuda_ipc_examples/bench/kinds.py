"""What differs between an image and a point cloud payload: its messages, typed publisher and reader, topics.

Everything else (pacing, the byte fill, the reduction, the timings) is the same for both kinds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .payloads import Payload

#: A real descriptor's socket path length ("@ros2_cuda_ipc/<pid>.<pid ns>/<pool id>"), for the floor's messages.
FLOOR_SOCKET_PATH = f"@ros2_cuda_ipc/{0:7d}.{0:10d}/{'0' * 32}"


class _TypedTopics:
    """The topics of a kind's typed-subscription rows, one per delivery."""

    direct_topic: str
    subscription_topic: str

    def topic_for(self, delivery: str) -> str:
        """The topic of the rows read by a typed subscription with ``delivery`` ("direct" or "executor")."""
        return self.direct_topic if delivery == "direct" else self.subscription_topic


class ImageKind(_TypedTopics):
    """rgba8 images: ``ImagePublisher`` / ``ImageReader``, ``GpuImage`` and ``sensor_msgs/Image``."""

    name = "image"
    gpu_topic = "ros2_cuda_ipc_benchmark/gpu_image"
    sensor_topic = "ros2_cuda_ipc_benchmark/image"
    fallback_topic = "ros2_cuda_ipc_benchmark/twinned_image"  # the fallback transport's pool; read on its twin
    twin_topic = f"{fallback_topic}/cpu"
    direct_topic = "ros2_cuda_ipc_benchmark/direct_image"  # the "-direct" transports' pools
    subscription_topic = "ros2_cuda_ipc_benchmark/subscribed_image"  # the "-subscription" transports' pools

    @property
    def gpu_message(self) -> Any:
        from ros2_cuda_ipc_msgs.msg import GpuImage

        return GpuImage

    @property
    def sensor_message(self) -> Any:
        from sensor_msgs.msg import Image

        return Image

    def publisher(self, node: Any, topic: str, payload: Payload, memory: str, blocks: int, reuse_delay: float,
                  qos: Any) -> Any:
        from ros2_cuda_ipc_image import ImagePublisher

        return ImagePublisher(node, topic, width=payload.width, height=payload.height, encoding="rgba8",
                              memory=memory, block_count=blocks, reuse_delay=reuse_delay, qos=qos)  # type: ignore[arg-type]

    def reader(self) -> Any:
        from ros2_cuda_ipc_image import ImageReader

        return ImageReader()

    def typed_subscription(self, node: Any, callback: Any, qos: Any, stream: Any, delivery: str) -> Any:
        from ros2_cuda_ipc_image import ImageSubscription

        return ImageSubscription(node, self.topic_for(delivery), callback, qos, fallback="never", stream=stream,
                                 delivery=delivery)  # type: ignore[arg-type]

    def frame_bytes(self, frame: Any) -> Any:
        """What the producer fills: the image frame itself (numpy / DLPack)."""
        return frame

    def view_bytes(self, view: Any) -> Any:
        """What the consumer reduces: the image view itself (numpy / DLPack)."""
        return view

    def sensor_frame(self, payload: Payload) -> Any:
        return self.sensor_message(height=payload.height, width=payload.width, encoding="rgba8", step=payload.width * 4)

    def floor_frame(self, payload: Payload) -> Any:
        msg = self.gpu_message(encoding="rgba8", shape=[payload.height, payload.width, 4],
                               strides=[payload.width * 4, 4, 1])
        msg.core.socket_path, msg.core.byte_size = FLOOR_SOCKET_PATH, payload.byte_size
        return msg


class CloudKind(_TypedTopics):
    """Ouster-layout point clouds: ``PointCloudPublisher`` / ``PointCloudReader``, ``GpuPointCloud2`` and ``PointCloud2``."""

    name = "cloud"
    gpu_topic = "ros2_cuda_ipc_benchmark/gpu_cloud"
    sensor_topic = "ros2_cuda_ipc_benchmark/cloud"
    fallback_topic = "ros2_cuda_ipc_benchmark/twinned_cloud"
    twin_topic = f"{fallback_topic}/cpu"
    direct_topic = "ros2_cuda_ipc_benchmark/direct_cloud"
    subscription_topic = "ros2_cuda_ipc_benchmark/subscribed_cloud"
    fields = "ouster"

    @property
    def gpu_message(self) -> Any:
        from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

        return GpuPointCloud2

    @property
    def sensor_message(self) -> Any:
        from sensor_msgs.msg import PointCloud2

        return PointCloud2

    def _layout(self, payload: Payload) -> Any:
        from ros2_cuda_ipc_pointcloud import CloudLayout

        return CloudLayout.create(self.fields, payload.width, payload.height)

    def publisher(self, node: Any, topic: str, payload: Payload, memory: str, blocks: int, reuse_delay: float,
                  qos: Any) -> Any:
        from ros2_cuda_ipc_pointcloud import PointCloudPublisher

        return PointCloudPublisher(node, topic, fields=self.fields, width=payload.width, height=payload.height,
                                   memory=memory, block_count=blocks, reuse_delay=reuse_delay,  # type: ignore[arg-type]
                                   qos=qos)

    def reader(self) -> Any:
        from ros2_cuda_ipc_pointcloud import PointCloudReader

        return PointCloudReader()

    def typed_subscription(self, node: Any, callback: Any, qos: Any, stream: Any, delivery: str) -> Any:
        from ros2_cuda_ipc_pointcloud import PointCloudSubscription

        return PointCloudSubscription(node, self.topic_for(delivery), callback, qos, fallback="never", stream=stream,
                                      delivery=delivery)  # type: ignore[arg-type]

    def frame_bytes(self, frame: Any) -> Any:
        """What the producer fills: every byte of every point."""
        return frame.data

    def view_bytes(self, view: Any) -> Any:
        """What the consumer reduces: every byte of every point, as one uint8 array of the block."""
        from ros2_cuda_ipc_core import StridedLayout

        return view.array_view(StridedLayout.contiguous((view.layout.data_size,), np.uint8), "cloud bytes")

    def sensor_frame(self, payload: Payload) -> Any:
        msg = self.sensor_message()
        self._layout(payload).fill_message(msg)
        return msg

    def floor_frame(self, payload: Payload) -> Any:
        msg = self.gpu_message()
        self._layout(payload).fill_message(msg)
        msg.core.socket_path, msg.core.byte_size = FLOOR_SOCKET_PATH, payload.byte_size
        return msg


KINDS: dict[str, ImageKind | CloudKind] = {"image": ImageKind(), "cloud": CloudKind()}
