"""Bridge nodes for the rest of ROS: ``gpu_to_image`` (for rviz, rqt, rosbag) and ``image_to_gpu`` (camera drivers).

    ros2 run ros2_cuda_ipc_image gpu_to_image --ros-args -r gpu_image:=/camera/gpu -r image:=/camera/image -p max_rate:=5.0
    ros2 run ros2_cuda_ipc_image image_to_gpu --ros-args -r image:=/camera/image_raw -r gpu_image:=/camera/gpu
"""

from __future__ import annotations

from typing import Any

from sensor_msgs.msg import Image

from ros2_cuda_ipc_core import DownloadBridge, UploadBridge, run_node
from ros2_cuda_ipc_msgs.msg import GpuImage

from .bridge import check_image_msg, gpu_image_bytes, to_image_msg
from .publisher import ImagePublisher, publish_image_msg
from .reader import ImageReader
from .subscription import image_fits
from .view import ImageView


class GpuToImage(DownloadBridge[ImageView]):
    """GpuImage -> sensor_msgs/Image.  Downloads only while someone subscribes, at most ``max_rate`` Hz (0: every frame)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("gpu_to_image", ImageReader(), to_image_msg, GpuImage, "gpu_image", Image, "image", "frame",
                         **kwargs)

    def output_bytes(self, msg: GpuImage) -> int:
        return gpu_image_bytes(msg)


class ImageToGpu(UploadBridge[ImagePublisher]):
    """sensor_msgs/Image -> GpuImage, one upload per frame into a pool sized by the first image (and resized on change)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("image_to_gpu", Image, "image", "image", **kwargs)

    def check(self, msg: Image) -> None:
        check_image_msg(msg, self.max_frame_bytes)

    def fits(self, publisher: ImagePublisher, msg: Image) -> bool:
        return image_fits(publisher, msg)

    def make_publisher(self, msg: Image) -> ImagePublisher:
        return ImagePublisher(self, "gpu_image", width=msg.width, height=msg.height, encoding=msg.encoding,
                              row_stride=msg.step, block_count=self.block_count, memory=self.memory,
                              reuse_delay=self.reuse_delay)

    def upload(self, publisher: ImagePublisher, msg: Image) -> GpuImage | None:
        return publish_image_msg(publisher, msg)


def gpu_to_image_main() -> None:
    raise SystemExit(run_node(GpuToImage))


def image_to_gpu_main() -> None:
    raise SystemExit(run_node(ImageToGpu))
