"""``PointCloudSubscription``: every cloud of a ``GpuPointCloud2`` topic as a ``PointCloudView``, zero-copy or through
its CPU twin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sensor_msgs.msg import PointCloud2

from ros2_cuda_ipc_core import DeliveryMode, FallbackMode, MemoryKind, StreamLike, TwinUpload, TypedSubscription
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

from .layout import CloudLayout
from .publisher import PointCloudPublisher, publish_pointcloud2_msg
from .reader import PointCloudReader
from .view import PointCloudView


def cloud_fits(publisher: PointCloudPublisher, msg: PointCloud2) -> bool:
    """Whether ``publisher``'s blocks take ``msg`` verbatim: same fields and point step, within its capacity."""
    cloud, mine = CloudLayout.from_message(msg), publisher.layout
    return (cloud.fields, cloud.point_step) == (mine.fields, mine.point_step) and cloud.height <= mine.height \
        and cloud.width <= mine.width and cloud.data_size <= publisher.pool.block_size


def cloud_publisher(node: Any, topic: str, msg: PointCloud2, **pool: Any) -> PointCloudPublisher:
    """A publisher sized and laid out like ``msg`` (checked first); ``pool`` keywords go to ``PointCloudPublisher``."""
    cloud = CloudLayout.from_message(msg).validate(len(msg.data))
    return PointCloudPublisher(node, topic, fields=list(msg.fields), width=cloud.width, height=cloud.height,
                               point_step=cloud.point_step, row_step=cloud.row_step, **pool)


class CloudTwinUpload(TwinUpload[PointCloudPublisher]):
    """``sensor_msgs/PointCloud2`` twins into local cloud blocks (one upload each), resized when a cloud outgrows them."""

    message_type = PointCloud2

    def fits(self, publisher: PointCloudPublisher, msg: PointCloud2) -> bool:
        return cloud_fits(publisher, msg)

    def make_publisher(self, msg: PointCloud2, memory: MemoryKind) -> PointCloudPublisher:
        return cloud_publisher(None, "", msg, block_count=self.block_count, memory=memory, reuse_delay=0.0,
                               fallback=False)

    def upload(self, publisher: PointCloudPublisher, msg: PointCloud2) -> GpuPointCloud2 | None:
        return publish_pointcloud2_msg(publisher, msg)


class PointCloudSubscription(TypedSubscription[PointCloudView]):
    """``callback(view)`` once per cloud on ``topic``: a ``PointCloudView`` whichever way the cloud came.

    As ``ImageSubscription``: zero-copy where the pool can be mapped, else the ``sensor_msgs/PointCloud2``
    twin (``fallback="auto"``, said once in the log) or nothing (``fallback="never"``, said as an error).
    """

    def __init__(self, node: Any, topic: str, callback: Callable[[PointCloudView], None], qos: Any = 10, *,
                 fallback: FallbackMode = "auto", memory: MemoryKind = "auto", stream: StreamLike = None,
                 fallback_topic: str | None = None, reader: PointCloudReader | None = None,
                 delivery: DeliveryMode = "executor") -> None:
        super().__init__(node, topic, GpuPointCloud2, reader or PointCloudReader(), CloudTwinUpload(), callback, qos,
                         fallback=fallback, memory=memory, stream=stream, fallback_topic=fallback_topic,
                         delivery=delivery)
