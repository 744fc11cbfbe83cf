"""Bridge nodes for the rest of ROS: ``gpu_to_pointcloud2`` (rviz, rosbag) and ``pointcloud2_to_gpu`` (LiDAR drivers).

    ros2 run ros2_cuda_ipc_pointcloud gpu_to_pointcloud2 --ros-args -r gpu_points:=/lidar/gpu -r points:=/lidar/points \
        -p max_rate:=5.0
    ros2 run ros2_cuda_ipc_pointcloud pointcloud2_to_gpu --ros-args -r points:=/ouster/points -r gpu_points:=/lidar/gpu
"""

from __future__ import annotations

from typing import Any

from sensor_msgs.msg import PointCloud2

from ros2_cuda_ipc_core import DownloadBridge, UploadBridge, run_node
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

from .bridge import check_pointcloud2_msg, to_pointcloud2_msg
from .publisher import PointCloudPublisher, publish_pointcloud2_msg
from .reader import PointCloudReader
from .subscription import cloud_fits, cloud_publisher
from .view import PointCloudView


class GpuToPointCloud2(DownloadBridge[PointCloudView]):
    """GpuPointCloud2 -> sensor_msgs/PointCloud2.  Downloads only while someone subscribes, at most ``max_rate`` Hz."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("gpu_to_pointcloud2", PointCloudReader(), to_pointcloud2_msg, GpuPointCloud2, "gpu_points",
                         PointCloud2, "points", "cloud", **kwargs)

    def output_bytes(self, msg: GpuPointCloud2) -> int:
        return int(msg.height) * int(msg.row_step)


class PointCloud2ToGpu(UploadBridge[PointCloudPublisher]):
    """sensor_msgs/PointCloud2 -> GpuPointCloud2, one upload per cloud.

    The pool is sized from the first cloud and made anew when the point layout changes or a cloud
    outgrows it; smaller clouds of the same layout reuse it (unorganized clouds vary every scan).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("pointcloud2_to_gpu", PointCloud2, "points", "cloud", **kwargs)

    def check(self, msg: PointCloud2) -> None:
        check_pointcloud2_msg(msg, self.max_frame_bytes)

    def fits(self, publisher: PointCloudPublisher, msg: PointCloud2) -> bool:
        return cloud_fits(publisher, msg)

    def make_publisher(self, msg: PointCloud2) -> PointCloudPublisher:
        return cloud_publisher(self, "gpu_points", msg, block_count=self.block_count, memory=self.memory,
                               reuse_delay=self.reuse_delay)

    def upload(self, publisher: PointCloudPublisher, msg: PointCloud2) -> GpuPointCloud2 | None:
        return publish_pointcloud2_msg(publisher, msg)


def gpu_to_pointcloud2_main() -> None:
    raise SystemExit(run_node(GpuToPointCloud2))


def pointcloud2_to_gpu_main() -> None:
    raise SystemExit(run_node(PointCloud2ToGpu))
