"""``ImagePublisher``: a pool of image-sized blocks and a ``GpuImage`` publisher on one topic."""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import DEFAULT_REUSE_DELAY, MemoryKind, StreamLike, TypedPublisher, copy_rows, strided_source
from ros2_cuda_ipc_msgs.msg import GpuImage

from .encodings import check_consistent, encoding_layout
from .frame import ImageFrame
from .layout import ImageLayout, packed_layout


class ImagePublisher(TypedPublisher[ImageLayout, GpuImage]):
    """Publishes images of one geometry without copying them: borrow a frame, fill it, publish it.

    Give either ``encoding`` or ``dtype`` + ``channels``.  Rows are ``row_stride`` bytes apart,
    by default the row size rounded up to ``row_alignment``.  ``block_count``, ``memory``, ``device``
    and ``reuse_delay`` (seconds before a published block is reused) configure the pool as in ``TypedPublisher``.
    """

    def __init__(self, node: Any, topic: str, *, width: int, height: int, encoding: str | None = None,
                 dtype: Any = None, channels: int | None = None, row_alignment: int = 1, row_stride: int | None = None,
                 block_count: int = 4, memory: MemoryKind = "auto", device: int = 0, qos: Any = 10,
                 reuse_delay: float = DEFAULT_REUSE_DELAY) -> None:
        if encoding:
            enc_dtype, enc_channels = encoding_layout(encoding)
            dtype = enc_dtype if dtype is None else np.dtype(dtype)
            channels = enc_channels if channels is None else channels
            check_consistent(encoding, dtype, channels)
        elif dtype is None or channels is None:
            raise ValueError("give an encoding, or both dtype and channels")
        if width <= 0 or height <= 0 or row_alignment <= 0:
            raise ValueError(f"width={width}, height={height} and row_alignment={row_alignment} must be positive")
        dtype = np.dtype(dtype)
        row_bytes = width * channels * dtype.itemsize
        stride = row_stride if row_stride is not None else -(-row_bytes // row_alignment) * row_alignment
        if stride < row_bytes:
            raise ValueError(f"row_stride {stride} is shorter than a row of {row_bytes} bytes")
        super().__init__(node, topic, GpuImage, packed_layout(height, width, channels, dtype, stride, encoding or ""),
                         block_count=block_count, memory=memory, device=device, qos=qos, reuse_delay=reuse_delay)

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
