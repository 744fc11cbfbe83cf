"""``ImagePublisher``: a pool of image-sized blocks and a ``GpuImage`` publisher on one topic."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import BlockManager
from ros2_cuda_ipc_core.pool import MemoryKind
from ros2_cuda_ipc_core.streams import StreamLike
from ros2_cuda_ipc_core.transfer import copy_rows
from ros2_cuda_ipc_msgs.msg import GpuImage

from .encodings import check_consistent, encoding_layout
from .frame import ImageFrame
from .layout import ImageLayout, packed_layout


class ImagePublisher:
    """Publishes images of one geometry without copying them: borrow a frame, fill it, publish it.

    Give either ``encoding`` or ``dtype`` + ``channels``.  Rows are ``row_stride`` bytes apart,
    by default the row size rounded up to ``row_alignment``.
    """

    def __init__(self, node: Any, topic: str, *, width: int, height: int, encoding: str | None = None,
                 dtype: Any = None, channels: int | None = None, row_alignment: int = 1, row_stride: int | None = None,
                 block_count: int = 4, memory: MemoryKind = "auto", device: int = 0, qos: Any = 10) -> None:
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
        self.layout = packed_layout(height, width, channels, dtype, stride, encoding or "")
        self.pool = BlockManager(height * stride, block_count=block_count, memory=memory, device=device)
        self.topic = topic
        self._node = node
        self._publisher = node.create_publisher(GpuImage, topic, qos)

    def borrow(self, timeout: float = 0.0) -> ImageFrame | None:
        """A writable frame, or None if every block is still in use after ``timeout`` seconds."""
        block = self.pool.acquire_for_publish(timeout)
        return None if block is None else ImageFrame(self, block, self.layout)

    def publish_array(self, array: Any, stream: StreamLike = None, header: Any = None) -> GpuImage | None:
        """Copy any (rows, cols[, channels]) DLPack / CUDA-array-interface / numpy image into a block and publish.

        One copy, for data that lives elsewhere.  Returns the message, or None if no block is free.
        """
        source = _strided_source(array)
        shape = tuple(source["shape"]) + ((1,) if len(source["shape"]) == 2 else ())
        if shape != self.layout.shape or np.dtype(source["dtype"]) != self.layout.dtype:
            raise ValueError(f"array is {shape} {np.dtype(source['dtype'])}, this publisher sends "
                             f"{self.layout.shape} {self.layout.dtype}")
        src = ImageLayout(shape, tuple(source["strides"]) + ((self.layout.dtype.itemsize,) if len(source["shape"]) == 2
                                                              else ()), self.layout.dtype)  # type: ignore[arg-type]
        if not src.rows_are_packed:
            raise ValueError(f"array strides {source['strides']} are not row-packed; pass a contiguous copy")
        frame = self.borrow()
        if frame is None:
            return None
        with frame:
            device = self.pool.device if self.pool.memory == "cuda" or source["device"] else None
            copy_rows(frame.device_ptr, self.layout.strides[0], source["ptr"], src.strides[0], self.layout.row_bytes,
                      self.layout.shape[0], cuda_device=device, stream=stream)
            return frame.publish(stream, header)

    def publish_bytes(self, data: bytes | memoryview, layout: ImageLayout, header: Any = None) -> GpuImage | None:
        """Publish ``layout`` read verbatim from host ``data`` (rows, padding and all): the sensor_msgs bridge."""
        if layout.byte_extent > self.pool.block_size or len(data) > self.pool.block_size:
            raise ValueError(f"{len(data)} bytes do not fit this publisher's {self.pool.block_size}-byte blocks")
        block = self.pool.acquire_for_publish()
        if block is None:
            return None
        with block:
            host = np.frombuffer(data, dtype=np.uint8)
            cuda = self.pool.device if self.pool.memory == "cuda" else None
            if len(host):
                copy_rows(block.device_ptr, len(host), host.ctypes.data, len(host), len(host), 1, cuda_device=cuda)
            return self._publish(block, layout, None, header, byte_size=max(len(host), layout.byte_extent))

    def _publish(self, block: Any, layout: ImageLayout, stream: StreamLike, header: Any,
                 byte_size: int | None = None) -> GpuImage:
        msg = GpuImage()
        if header is not None:
            msg.header = header
        layout.fill_message(msg)
        whole_rows = layout.shape[0] * layout.strides[0]  # the last row's padding too, when the block has it
        msg.core = block.prepare_publish(stream, byte_size or min(block.capacity, max(layout.byte_extent, whole_rows)))
        self._publisher.publish(msg)
        return msg

    def close(self) -> None:
        self._node.destroy_publisher(self._publisher)
        self.pool.close()

    def __enter__(self) -> ImagePublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _strided_source(array: Any) -> dict[str, Any]:
    """Pointer, shape, byte strides, dtype and whether it is on a GPU, for numpy / CAI / DLPack objects."""
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is not None:
        dtype = np.dtype(interface["typestr"])
        shape = tuple(interface["shape"])
        strides = interface.get("strides") or _c_strides(shape, dtype.itemsize)
        return {"ptr": interface["data"][0], "shape": shape, "strides": tuple(strides), "dtype": dtype, "device": True}
    if hasattr(array, "__dlpack_device__") and array.__dlpack_device__()[0] != 1:
        from cuda.core.utils import StridedMemoryView

        view = StridedMemoryView(array, stream_ptr=-1)
        dtype = np.dtype(view.dtype)
        strides = tuple(s * dtype.itemsize for s in view.strides) if view.strides else _c_strides(view.shape, dtype.itemsize)
        return {"ptr": view.ptr, "shape": tuple(view.shape), "strides": strides, "dtype": dtype, "device": True}
    host = np.asarray(array)
    if sys.byteorder == "little" and host.dtype.byteorder == ">":
        host = host.astype(host.dtype.newbyteorder("="))
    return {"ptr": host.ctypes.data, "shape": host.shape, "strides": host.strides, "dtype": host.dtype, "device": False,
            "keepalive": host}


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    from ros2_cuda_ipc_core.views import contiguous_strides

    return contiguous_strides(shape, itemsize)
