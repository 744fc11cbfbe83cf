"""Bridge nodes for the rest of ROS: ``gpu_to_image`` (for rviz, rqt, rosbag) and ``image_to_gpu`` (camera drivers).

    ros2 run ros2_cuda_ipc_image gpu_to_image --ros-args -r gpu_image:=/camera/gpu -r image:=/camera/image -p max_rate:=5.0
    ros2 run ros2_cuda_ipc_image image_to_gpu --ros-args -r image:=/camera/image_raw -r gpu_image:=/camera/gpu
"""

from __future__ import annotations

import time
from typing import Any

from rclpy.node import Node
from sensor_msgs.msg import Image

from ros2_cuda_ipc_core import Ros2CudaIpcError, run_nodes
from ros2_cuda_ipc_msgs.msg import GpuImage

from .bridge import publish_image_msg, to_image_msg
from .publisher import ImagePublisher
from .reader import ImageReader


class GpuToImage(Node):
    """GpuImage -> sensor_msgs/Image.  Downloads only while someone subscribes, at most ``max_rate`` Hz (0: every frame)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("gpu_to_image", **kwargs)
        self.max_rate = float(self.declare_parameter("max_rate", 0.0).value)
        self.reader = ImageReader()
        self.converted = self.skipped = self.dropped = 0
        self._last = 0.0
        self._out = self.create_publisher(Image, "image", 10)
        self.create_subscription(GpuImage, "gpu_image", self._on_image, 10)
        self.create_timer(float(self.declare_parameter("stats_period", 10.0).value), self._log_stats)

    def _log_stats(self) -> None:
        self.get_logger().info(f"converted {self.converted}, skipped {self.skipped}, dropped {self.dropped}; "
                               f"reader {self.reader.stats()}")

    def _on_image(self, msg: GpuImage) -> None:
        now = time.monotonic()
        if self._out.get_subscription_count() == 0 or (self.max_rate > 0 and now - self._last < 1.0 / self.max_rate):
            self.skipped += 1
            return
        try:
            with self.reader.read(msg) as view:
                image = to_image_msg(view)
        except Ros2CudaIpcError as exc:
            self.dropped += 1
            self.get_logger().warning(f"frame dropped: {exc}", throttle_duration_sec=5.0)
            return
        self._last = now
        self._out.publish(image)
        self.converted += 1


class ImageToGpu(Node):
    """sensor_msgs/Image -> GpuImage, one upload per frame into a pool sized by the first image (and resized on change)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("image_to_gpu", **kwargs)
        self.memory = str(self.declare_parameter("memory", "auto").value)
        self.block_count = int(self.declare_parameter("block_count", 4).value)
        self.publisher: ImagePublisher | None = None
        self._geometry: tuple[int, int, str, int] | None = None
        self.dropped = 0
        self.create_subscription(Image, "image", self._on_image, 10)
        self.create_timer(float(self.declare_parameter("stats_period", 10.0).value), self._log_stats)

    def _log_stats(self) -> None:
        if self.publisher is not None:
            self.get_logger().info(f"dropped {self.dropped}; pool {self.publisher.pool.stats()}")

    def _on_image(self, msg: Image) -> None:
        geometry = (msg.height, msg.width, msg.encoding, msg.step)
        if self.publisher is None or self._geometry != geometry:
            if self.publisher is not None:
                self.publisher.close()
            self.publisher = ImagePublisher(self, "gpu_image", width=msg.width, height=msg.height, encoding=msg.encoding,
                                            row_stride=msg.step, block_count=self.block_count, memory=self.memory)  # type: ignore[arg-type]
            self._geometry = geometry
            self.get_logger().info(f"publishing {msg.width}x{msg.height} {msg.encoding} as {self.publisher.pool.memory} frames")
        try:
            if publish_image_msg(self.publisher, msg) is None:
                self.dropped += 1
        except Ros2CudaIpcError as exc:
            self.dropped += 1
            self.get_logger().warning(f"image dropped: {exc}", throttle_duration_sec=5.0)


def gpu_to_image_main() -> None:
    raise SystemExit(run_nodes(lambda: [GpuToImage()]))


def image_to_gpu_main() -> None:
    raise SystemExit(run_nodes(lambda: [ImageToGpu()]))
