"""The bridge to ``sensor_msgs/Image``: one download out, bit for bit (the upload in: ``publish_image_msg``)."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

import numpy as np
from sensor_msgs.msg import Image

from ros2_cuda_ipc_core import InvalidDescriptorError, check_frame_bytes, copy_rows, message_bytes
from ros2_cuda_ipc_msgs.msg import GpuImage

from .encodings import DTYPE_CODES, encoding_layout, generic_encoding

if TYPE_CHECKING:
    from .view import ImageView


def to_image_msg(view: ImageView) -> Image:
    """A ``sensor_msgs/Image`` of ``view``: rows and their padding kept when rows are packed, else made dense.

    The download lands in the :func:`message_bytes` buffer that becomes ``msg.data``, which every
    distro's setter keeps without looking at each byte.
    """
    layout = view.layout
    rows, cols, channels = layout.shape
    encoding = layout.encoding or generic_encoding(layout.dtype, channels)
    if encoding is None:
        raise InvalidDescriptorError(f"{channels} x {layout.dtype} has no sensor_msgs encoding")
    row_stride = layout.strides[0]
    keep_padding = layout.rows_are_packed and row_stride >= layout.row_bytes and rows * row_stride <= view.handle.byte_size
    step = row_stride if keep_padding else layout.row_bytes
    data = message_bytes(rows * step)
    address = data.buffer_info()[0]
    cuda = view.handle.device_id if view.memory == "cuda" else None
    if keep_padding:
        copy_rows(address, step, view.handle.device_ptr, step, step, rows, cuda, view.stream)
    elif layout.rows_are_packed:
        copy_rows(address, step, view.handle.device_ptr, row_stride, layout.row_bytes, rows, cuda, view.stream)
    else:  # planar or otherwise strided: one download of the span, then restride on the host
        span = np.empty(layout.byte_extent, dtype=np.uint8)
        copy_rows(span.ctypes.data, len(span), view.handle.device_ptr, len(span), len(span), 1, cuda, view.stream)
        strided = np.lib.stride_tricks.as_strided(span.view(layout.dtype), layout.shape, layout.strides)
        np.copyto(np.frombuffer(data, dtype=layout.dtype).reshape(layout.shape), strided)
    msg = Image()
    msg.header = view.header
    msg.height, msg.width, msg.encoding = rows, cols, encoding
    msg.is_bigendian = int(sys.byteorder == "big")
    msg.step = step
    msg.data = data
    return msg


def check_image_msg(msg: Image, max_bytes: int) -> None:
    """Refuse an Image whose claims (rows, step, encoding) disagree with the bytes it carries, or that makes a frame
    of more than ``max_bytes``: checked before any pool is sized by it (InvalidDescriptorError naming the field)."""
    dtype, channels = encoding_layout(msg.encoding)
    row_bytes = msg.width * channels * dtype.itemsize
    if msg.height == 0 or msg.width == 0:
        raise InvalidDescriptorError(f"Image of {msg.width} x {msg.height} pixels: no frame to publish")
    if msg.step < row_bytes:
        raise InvalidDescriptorError(f"Image step {msg.step} is shorter than its {msg.width} x {channels} x "
                                     f"{dtype} = {row_bytes}-byte rows")
    check_frame_bytes(msg.height * msg.step, max_bytes, f"an Image of {msg.height} rows of step {msg.step}")
    if len(msg.data) < msg.height * msg.step:
        raise InvalidDescriptorError(f"Image of {msg.height} rows with step {msg.step} carries {len(msg.data)} bytes, "
                                     f"not {msg.height * msg.step}")


def gpu_image_bytes(msg: GpuImage) -> int:
    """Bytes of the sensor_msgs/Image a GpuImage's download makes (rows x dense row bytes), by its claims."""
    item = DTYPE_CODES[msg.dtype].itemsize if msg.dtype in DTYPE_CODES else 1
    return math.prod(int(n) for n in msg.shape) * item
