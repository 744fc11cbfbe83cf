"""Typed zero-copy images over ros2_cuda_ipc: ``ImagePublisher``, ``ImageReader``, and the sensor_msgs/Image bridge."""

from .bridge import publish_image_msg, to_image_msg
from .encodings import ENCODINGS, encoding_layout, generic_encoding
from .frame import ImageFrame
from .layout import ImageLayout
from .publisher import ImagePublisher
from .reader import ImageReader
from .view import ImageView

__all__ = [
    "ENCODINGS",
    "ImageFrame",
    "ImageLayout",
    "ImagePublisher",
    "ImageReader",
    "ImageView",
    "encoding_layout",
    "generic_encoding",
    "publish_image_msg",
    "to_image_msg",
]
