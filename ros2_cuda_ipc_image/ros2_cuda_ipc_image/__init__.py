"""Typed zero-copy images over ros2_cuda_ipc: ``ImagePublisher``, ``ImageSubscription``, ``ImageReader``, and the
sensor_msgs/Image bridge and CPU twins."""

import ros2_cuda_ipc_core  # noqa: F401  (first: in an executable, a stop from here on is a clean exit 0: core.startup)

from .bridge import to_image_msg
from .compressed import JPEG_ORDERS, compressed_format, to_compressed_image_msg
from .encodings import ENCODINGS, encoding_layout, generic_encoding
from .frame import ImageFrame
from .layout import ImageLayout
from .publisher import ImagePublisher, publish_image_msg
from .reader import ImageReader
from .subscription import ImageSubscription, ImageTwinUpload
from .view import ImageView

__all__ = [
    "ENCODINGS",
    "JPEG_ORDERS",
    "ImageFrame",
    "ImageLayout",
    "ImagePublisher",
    "ImageReader",
    "ImageSubscription",
    "ImageTwinUpload",
    "ImageView",
    "compressed_format",
    "encoding_layout",
    "generic_encoding",
    "publish_image_msg",
    "to_compressed_image_msg",
    "to_image_msg",
]
