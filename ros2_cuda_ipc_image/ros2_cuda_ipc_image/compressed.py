"""The ``/compressed`` twin: a ``sensor_msgs/CompressedImage`` (JPEG) of an image view, as image_transport writes it.

``format`` is what image_transport's compressed plugin writes ("rgb8; jpeg compressed bgr8", "mono8; jpeg
compressed mono8"), so rqt_image_view, foxglove and image_transport's decoder read it.  The JPEG is made
on the GPU for CUDA views when torchvision is there, by Pillow otherwise (:func:`encode_jpeg`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sensor_msgs.msg import CompressedImage

from ros2_cuda_ipc_core import ChannelOrder, encode_jpeg

if TYPE_CHECKING:
    from .view import ImageView

#: 8-bit encodings a JPEG twin can be made of, and their channel order.
JPEG_ORDERS: dict[str, ChannelOrder] = {"rgb8": "rgb", "bgr8": "bgr", "rgba8": "rgba", "bgra8": "bgra",
                                        "mono8": "mono", "8UC1": "mono", "8UC3": "bgr", "8UC4": "bgra"}
DEFAULT_JPEG_QUALITY = 80


def compressed_format(encoding: str) -> str:
    """The ``format`` image_transport's compressed plugin writes for a JPEG of an ``encoding`` image."""
    return f"{encoding}; jpeg compressed {'mono8' if JPEG_ORDERS[encoding] == 'mono' else 'bgr8'}"


def to_compressed_image_msg(view: ImageView, quality: int = DEFAULT_JPEG_QUALITY) -> CompressedImage:
    """A JPEG ``sensor_msgs/CompressedImage`` of ``view`` (an encoding of :data:`JPEG_ORDERS`); ValueError otherwise."""
    order = JPEG_ORDERS.get(view.encoding)
    if order is None:
        raise ValueError(f"a {view.encoding or view.dtype} image has no JPEG twin; 8-bit encodings have: "
                         f"{', '.join(JPEG_ORDERS)}")
    msg = CompressedImage()
    msg.header = view.header
    msg.format = compressed_format(view.encoding)
    msg.data = encode_jpeg(view.array, order, quality, stream=view.stream)
    return msg
