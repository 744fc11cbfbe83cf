"""Bridge nodes for the rest of ROS: ``gpu_to_pointcloud2`` (rviz, rosbag) and ``pointcloud2_to_gpu`` (LiDAR drivers).

    ros2 run ros2_cuda_ipc_pointcloud gpu_to_pointcloud2 --ros-args -r gpu_points:=/lidar/gpu -r points:=/lidar/points \
        -p max_rate:=5.0
    ros2 run ros2_cuda_ipc_pointcloud pointcloud2_to_gpu --ros-args -r points:=/ouster/points -r gpu_points:=/lidar/gpu
"""

from __future__ import annotations

import time
from typing import Any, cast

from rclpy.node import Node
from sensor_msgs.msg import PointCloud2

from ros2_cuda_ipc_core import MemoryKind, Ros2CudaIpcError, run_nodes
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

from .bridge import publish_pointcloud2_msg, to_pointcloud2_msg
from .layout import CloudLayout
from .publisher import PointCloudPublisher
from .reader import PointCloudReader


class GpuToPointCloud2(Node):
    """GpuPointCloud2 -> sensor_msgs/PointCloud2.  Downloads only while someone subscribes, at most ``max_rate`` Hz."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("gpu_to_pointcloud2", **kwargs)
        self.max_rate = float(self.declare_parameter("max_rate", 0.0).value)
        self.reader = PointCloudReader()
        self.converted = self.skipped = self.dropped = 0
        self._last = 0.0
        self._out = self.create_publisher(PointCloud2, "points", 10)
        self.create_subscription(GpuPointCloud2, "gpu_points", self._on_cloud, 10)
        self.create_timer(float(self.declare_parameter("stats_period", 10.0).value), self._log_stats)

    @property
    def listeners(self) -> int:
        """Subscribers of the PointCloud2 output: with none, nothing is downloaded."""
        return int(self._out.get_subscription_count())

    def _log_stats(self) -> None:
        self.get_logger().info(f"converted {self.converted}, skipped {self.skipped}, dropped {self.dropped}; "
                               f"reader {self.reader.stats()}")

    def _on_cloud(self, msg: GpuPointCloud2) -> None:
        now = time.monotonic()
        if self.listeners == 0 or (self.max_rate > 0 and now - self._last < 1.0 / self.max_rate):
            self.skipped += 1
            return
        try:
            with self.reader.read(msg) as view:
                cloud = to_pointcloud2_msg(view)
        except Ros2CudaIpcError as exc:
            self.dropped += 1
            self.get_logger().warning(f"cloud dropped: {exc}", throttle_duration_sec=5.0)
            return
        self._last = now
        self._out.publish(cloud)
        self.converted += 1


class PointCloud2ToGpu(Node):
    """sensor_msgs/PointCloud2 -> GpuPointCloud2, one upload per cloud.

    The pool is sized from the first cloud and made anew when the point layout changes or a cloud
    outgrows it; smaller clouds of the same layout reuse it.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("pointcloud2_to_gpu", **kwargs)
        self.memory = str(self.declare_parameter("memory", "auto").value)
        self.block_count = int(self.declare_parameter("block_count", 4).value)
        self.publisher: PointCloudPublisher | None = None
        self.dropped = 0
        self.create_subscription(PointCloud2, "points", self._on_cloud, 10)
        self.create_timer(float(self.declare_parameter("stats_period", 10.0).value), self._log_stats)

    def _log_stats(self) -> None:
        if self.publisher is not None:
            self.get_logger().info(f"dropped {self.dropped}; pool {self.publisher.pool.stats()}")

    def _publisher_for(self, cloud: CloudLayout, msg: PointCloud2) -> PointCloudPublisher:
        """The publisher, made anew when ``cloud`` has another point layout or outgrows its pool."""
        current = self.publisher
        if current is not None and (cloud.fields, cloud.point_step) == (current.layout.fields, current.layout.point_step) \
                and cloud.height <= current.layout.height and cloud.width <= current.layout.width \
                and cloud.data_size <= current.pool.block_size:
            return current
        if current is not None:
            current.close()
        self.publisher = PointCloudPublisher(self, "gpu_points", fields=list(msg.fields), width=cloud.width,
                                             height=cloud.height, point_step=cloud.point_step, row_step=cloud.row_step,
                                             block_count=self.block_count, memory=cast("MemoryKind", self.memory))
        self.get_logger().info(f"publishing {cloud.height} x {cloud.width} points of {cloud.point_step} bytes "
                               f"({list(cloud.field_names)}) as {self.publisher.pool.memory} clouds")
        return self.publisher

    def _on_cloud(self, msg: PointCloud2) -> None:
        try:
            cloud = CloudLayout.from_message(msg).validate(len(msg.data))
            if publish_pointcloud2_msg(self._publisher_for(cloud, msg), msg) is None:
                self.dropped += 1
        except (Ros2CudaIpcError, ValueError) as exc:
            self.dropped += 1
            self.get_logger().warning(f"cloud dropped: {exc}", throttle_duration_sec=5.0)


def gpu_to_pointcloud2_main() -> None:
    raise SystemExit(run_nodes(lambda: [GpuToPointCloud2()]))


def pointcloud2_to_gpu_main() -> None:
    raise SystemExit(run_nodes(lambda: [PointCloud2ToGpu()]))
