"""``ImagePublisher``: a pool of image-sized blocks and a ``GpuImage`` publisher on one topic."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from sensor_msgs.msg import CompressedImage, Image

from ros2_cuda_ipc_core import (
    DEFAULT_REUSE_DELAY,
    InvalidDescriptorError,
    MemoryKind,
    StreamLike,
    TwinSpec,
    TypedPublisher,
    check_count,
    check_index,
    check_optional_count,
    copy_rows,
    strided_source,
    warm_up_jpeg,
)
from ros2_cuda_ipc_msgs.msg import GpuImage

from .bridge import to_image_msg
from .compressed import DEFAULT_JPEG_QUALITY, JPEG_ORDERS, to_compressed_image_msg
from .encodings import check_consistent, encoding_layout
from .frame import ImageFrame
from .layout import ImageLayout, packed_layout
from .reader import ImageReader


class ImagePublisher(TypedPublisher[ImageLayout, GpuImage]):
    """Publishes images of one geometry without copying them: borrow a frame, fill it, publish it.

    Give either ``encoding`` or ``dtype`` + ``channels``.  Rows are ``row_stride`` bytes apart,
    by default the row size rounded up to ``row_alignment``.  ``block_count``, ``memory``, ``device``
    and ``reuse_delay`` (seconds before a published block is reused) configure the pool as in ``TypedPublisher``.

    CPU twins (``fallback``, ``fallback_rate``, ``fallback_topic`` as in ``TypedPublisher``): a
    ``sensor_msgs/Image`` on ``<resolved topic>/cpu`` and, for 8-bit encodings, its JPEG
    ``sensor_msgs/CompressedImage`` on ``<resolved topic>/cpu/compressed``, each fed only while subscribed.
    ``jpeg_quality`` (1..100) defaults to the node's ``jpeg_quality`` parameter (declared if absent; 80).
    """

    def __init__(self, node: Any, topic: str, *, width: int, height: int, encoding: str | None = None,
                 dtype: Any = None, channels: int | None = None, row_alignment: int = 1, row_stride: int | None = None,
                 block_count: int = 4, memory: MemoryKind = "auto", device: int = 0, qos: Any = 10,
                 reuse_delay: float = DEFAULT_REUSE_DELAY, fallback: bool = True, fallback_rate: float = 0.0,
                 fallback_topic: str | None = None, jpeg_quality: int | None = None) -> None:
        width, height = check_count("width", width), check_count("height", height)
        row_alignment = check_count("row_alignment", row_alignment)
        channels, row_stride = check_optional_count("channels", channels), check_optional_count("row_stride", row_stride)
        self.jpeg_quality = _jpeg_quality(node, jpeg_quality) if node is not None and fallback else DEFAULT_JPEG_QUALITY
        if encoding:
            enc_dtype, enc_channels = encoding_layout(encoding)
            dtype = enc_dtype if dtype is None else np.dtype(dtype)
            channels = enc_channels if channels is None else channels
            check_consistent(encoding, dtype, channels)
        elif dtype is None or channels is None:
            raise ValueError("give an encoding, or both dtype and channels")
        dtype = np.dtype(dtype)
        row_bytes = width * channels * dtype.itemsize
        stride = row_stride if row_stride is not None else -(-row_bytes // row_alignment) * row_alignment
        if stride < row_bytes:
            raise ValueError(f"row_stride {stride} is shorter than a row of {row_bytes} bytes")
        super().__init__(node, topic, GpuImage, packed_layout(height, width, channels, dtype, stride, encoding or ""),
                         block_count=block_count, memory=memory, device=device, qos=qos, reuse_delay=reuse_delay,
                         fallback=fallback, fallback_rate=fallback_rate, fallback_topic=fallback_topic)

    def twin_specs(self, base_topic: str) -> list[TwinSpec]:
        specs = [TwinSpec(Image, base_topic, to_image_msg)]
        if self.layout.encoding in JPEG_ORDERS:
            quality, memory, device = self.jpeg_quality, self.pool.memory, self.pool.device
            specs.append(TwinSpec(CompressedImage, f"{base_topic}/compressed",
                                  lambda view: to_compressed_image_msg(view, quality), "encodes",
                                  lambda: warm_up_jpeg(memory, device)))
        return specs

    def twin_reader(self) -> ImageReader:
        return ImageReader()

    def borrow(self, timeout: float = 0.0) -> ImageFrame | None:
        """A writable frame, or None if every block is still in use after ``timeout`` seconds."""
        block = self.pool.acquire_for_publish(timeout)
        return None if block is None else ImageFrame(self, block, self.layout)

    def publish_array(self, array: Any, stream: StreamLike = None, header: Any = None) -> GpuImage | None:
        """Copy any (rows, cols[, channels]) DLPack / CUDA-array-interface / numpy image into a block and publish.

        One copy, for data that lives elsewhere.  Returns the message, or None if no block is free.
        """
        source = strided_source(array)
        shape, strides = source.layout.shape, source.layout.strides
        if len(shape) == 2:
            shape, strides = (*shape, 1), (*strides, self.layout.dtype.itemsize)
        if shape != self.layout.shape or source.layout.dtype != self.layout.dtype:
            raise ValueError(f"array is {shape} {source.layout.dtype}, this publisher sends "
                             f"{self.layout.shape} {self.layout.dtype}")
        src = ImageLayout(shape, strides, self.layout.dtype)  # type: ignore[arg-type]
        if not src.rows_are_packed:
            raise ValueError(f"array strides {source.layout.strides} are not row-packed; pass a contiguous copy")
        frame = self.borrow()
        if frame is None:
            return None
        with frame:
            device = self.pool.device if self.pool.memory == "cuda" or source.on_device else None
            copy_rows(frame.device_ptr, self.layout.strides[0], source.address, src.strides[0], self.layout.row_bytes,
                      self.layout.shape[0], cuda_device=device, stream=stream)
            return frame.publish(stream, header)


def _jpeg_quality(node: Any, quality: int | None) -> int:
    """``quality`` if given, else the node's ``jpeg_quality`` parameter (declared here when absent); 1..100."""
    if quality is None:
        if not node.has_parameter("jpeg_quality"):
            node.declare_parameter("jpeg_quality", DEFAULT_JPEG_QUALITY)
        quality = int(node.get_parameter("jpeg_quality").value)
    if not 1 <= check_index("jpeg_quality", quality) <= 100:
        raise ValueError(f"jpeg_quality {quality} is outside 1..100")
    return quality


def publish_image_msg(image_publisher: ImagePublisher, msg: Image) -> GpuImage | None:
    """Publish a ``sensor_msgs/Image`` through ``image_publisher`` with one upload.

    Its rows travel with the message's step when they fit a block; an image of the publisher's
    geometry whose padded rows do not fit is repacked to the publisher's row stride in that same
    upload.  Returns the ``GpuImage`` sent, or None if no block was free.  Big-endian multi-byte
    data is byte-swapped to this machine's order first (GpuImage has no endianness field).
    """
    dtype, channels = encoding_layout(msg.encoding)
    given = packed_layout(msg.height, msg.width, channels, dtype, msg.step, msg.encoding)
    if msg.step < given.row_bytes or len(msg.data) < msg.height * msg.step:
        raise InvalidDescriptorError(f"Image of {msg.height} rows with step {msg.step} carries {len(msg.data)} bytes; "
                                     f"rows need {given.row_bytes} bytes each")
    data = memoryview(msg.data)[: msg.height * msg.step]
    if bool(msg.is_bigendian) != (sys.byteorder == "big") and dtype.itemsize > 1:
        data = np.frombuffer(data, dtype=dtype.newbyteorder(">")).astype(dtype).view(np.uint8).data
    given.validate(len(data))
    if len(data) <= image_publisher.pool.block_size:
        return image_publisher.publish_bytes(data, given, msg.header)
    mine = image_publisher.layout
    if (given.shape, given.dtype) != (mine.shape, mine.dtype):
        raise ValueError(f"a {msg.width}x{msg.height} {msg.encoding} image with step {msg.step} ({len(data)} bytes) "
                         f"does not fit this publisher's {image_publisher.pool.block_size}-byte blocks, and is not its "
                         f"{mine.shape[1]}x{mine.shape[0]} geometry, whose rows would be repacked")
    block = image_publisher.pool.acquire_for_publish()
    if block is None:
        return None
    repacked = packed_layout(msg.height, msg.width, channels, dtype, mine.strides[0], msg.encoding)
    rows = np.lib.stride_tricks.as_strided(np.frombuffer(data, dtype=dtype), given.shape, given.strides)
    with ImageFrame(image_publisher, block, repacked) as frame:
        frame.copy_in(repacked, rows)
        return frame.publish(header=msg.header)
