"""What the recorder does with one topic's messages, by kind: a ``GpuImage`` becomes ``sensor_msgs/Image`` (or
``CompressedImage``), a ``GpuPointCloud2`` becomes ``PointCloud2``, anything else is kept as it arrived.

A GPU recording has two halves.  :meth:`download` runs in the subscription callback with the frame leased:
it only enqueues one copy of the frame into a ring buffer on the side stream (host memory; device memory
for a JPEG encoded on the GPU) and notes what the message needs besides the bytes.  :meth:`serialize` runs
on the writer thread once that copy is done and makes the CDR bytes ``ros2 bag record`` would have stored
for the same message (rosbags' serializer: the same bytes as rclpy's, padding bytes zeroed where rclpy
leaves them uninitialised).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ros2_cuda_ipc_core import InvalidDescriptorError, copy_rows, copy_strided
from ros2_cuda_ipc_image import ImageReader, ImageView, generic_encoding
from ros2_cuda_ipc_pointcloud import PointCloudReader, PointCloudView

from .frame_ring import RingBuffer, RingKind
from .message_types import MessageTypes

__all__ = ["CloudRecording", "CompressedImageRecording", "GpuRecording", "ImageRecording", "JpegEncoder",
           "PendingFrame"]


class JpegEncoder(Protocol):
    """The encoder of the compressed CPU twins (``ros2_cuda_ipc_core.encode_jpeg``, issue 17)."""

    def __call__(self, image: Any, order: Any, quality: int = 80, *, stream: Any = None) -> bytes: ...


@dataclass
class PendingFrame:
    """A frame whose download has been enqueued: the header and geometry its message needs, and its size."""

    header: Any
    length: int
    fields: dict[str, Any]


def _header(types: MessageTypes, header: Any) -> Any:
    stamp = types.new("builtin_interfaces/msg/Time", sec=int(header.stamp.sec), nanosec=int(header.stamp.nanosec))
    return types.new("std_msgs/msg/Header", stamp=stamp, frame_id=str(header.frame_id))


class GpuRecording:
    """The common part: a typed reader of this topic and the rosbags type store."""

    msgtype = ""
    #: Where CUDA frames are copied to: page-locked host memory, unless the recording encodes on the GPU.
    cuda_ring: RingKind = "pinned"

    def __init__(self, types: MessageTypes, reader: Any) -> None:
        self.types = types
        self.reader = reader

    def size(self, view: Any) -> int:
        """Host bytes the download of ``view`` needs."""
        raise NotImplementedError

    def download(self, view: Any, address: int, stream: int) -> PendingFrame:
        """Enqueue the copy of ``view`` to ``address`` (a ring buffer) on ``stream`` (a host frame is copied now)."""
        raise NotImplementedError

    def serialize(self, frame: PendingFrame, buffer: RingBuffer) -> memoryview:
        """The CDR bytes of the bag message, from the copy in ``buffer`` (``frame.length`` bytes)."""
        raise NotImplementedError


def _cuda_device(view: Any) -> int | None:
    return int(view.handle.device_id) if view.memory == "cuda" else None


class ImageRecording(GpuRecording):
    """``GpuImage`` to ``sensor_msgs/Image``: rows made dense (``step`` = row bytes), any layout, one copy."""

    msgtype = "sensor_msgs/msg/Image"

    def __init__(self, types: MessageTypes, reader: ImageReader) -> None:
        super().__init__(types, reader)

    def size(self, view: ImageView) -> int:
        rows, _, _ = view.layout.shape
        return rows * view.layout.row_bytes

    def download(self, view: ImageView, address: int, stream: int) -> PendingFrame:
        layout = view.layout
        rows, cols, channels = layout.shape
        encoding = layout.encoding or generic_encoding(layout.dtype, channels)
        if encoding is None:
            raise InvalidDescriptorError(f"{channels} x {layout.dtype} has no sensor_msgs encoding")
        item = layout.dtype.itemsize
        copy_strided(address, (layout.row_bytes, channels * item, item), view.handle.device_ptr, layout.strides,
                     layout.shape, item, _cuda_device(view), stream, wait=False)
        return PendingFrame(view.header, rows * layout.row_bytes,
                            {"height": rows, "width": cols, "encoding": encoding, "step": layout.row_bytes,
                             "channels": channels})

    def serialize(self, frame: PendingFrame, buffer: RingBuffer) -> memoryview:
        f = frame.fields
        msg = self.types.new(self.msgtype, header=_header(self.types, frame.header), height=f["height"],
                             width=f["width"], encoding=f["encoding"], is_bigendian=int(sys.byteorder == "big"),
                             step=f["step"], data=buffer.array((frame.length,)))
        return self.types.serialize(msg, self.msgtype)


#: Image encodings JPEG can take, and the channel order the encoder is told.
_JPEG_ORDERS = {"rgb8": "rgb", "bgr8": "bgr", "rgba8": "rgba", "bgra8": "bgra", "mono8": "mono"}


class CompressedImageRecording(ImageRecording):
    """``GpuImage`` to ``sensor_msgs/CompressedImage``, JPEG, ``format`` as image_transport's compressed plugin
    writes it (``rgb8; jpeg compressed bgr8``), so its tools decode it."""

    msgtype = "sensor_msgs/msg/CompressedImage"

    def __init__(self, types: MessageTypes, reader: ImageReader, encode: JpegEncoder, quality: int,
                 on_gpu: bool = False) -> None:
        super().__init__(types, reader)
        self.encode = encode
        self.quality = quality
        if on_gpu:  # CUDA frames: copied on the GPU and encoded there (nvJPEG); only the JPEG reaches the host
            self.cuda_ring = "device"

    def download(self, view: ImageView, address: int, stream: int) -> PendingFrame:
        if (view.layout.encoding or "") not in _JPEG_ORDERS:
            raise InvalidDescriptorError(f"a {view.layout.encoding or view.layout.dtype} image cannot be JPEG "
                                         f"encoded (one of {', '.join(_JPEG_ORDERS)})")
        return super().download(view, address, stream)

    def serialize(self, frame: PendingFrame, buffer: RingBuffer) -> memoryview:
        f = frame.fields
        shape = (f["height"], f["width"]) if f["channels"] == 1 else (f["height"], f["width"], f["channels"])
        order = _JPEG_ORDERS[f["encoding"]]
        jpeg = self.encode(buffer.array(shape), order, self.quality)
        written = "mono8" if order == "mono" else "bgr8"
        msg = self.types.new(self.msgtype, header=_header(self.types, frame.header),
                             format=f"{f['encoding']}; jpeg compressed {written}",
                             data=np.frombuffer(jpeg, dtype=np.uint8))
        return self.types.serialize(msg, self.msgtype)


class CloudRecording(GpuRecording):
    """``GpuPointCloud2`` to ``sensor_msgs/PointCloud2``: the bytes, point layout and padding as they are."""

    msgtype = "sensor_msgs/msg/PointCloud2"

    def __init__(self, types: MessageTypes, reader: PointCloudReader) -> None:
        super().__init__(types, reader)

    def size(self, view: PointCloudView) -> int:
        return int(view.layout.data_size)

    def download(self, view: PointCloudView, address: int, stream: int) -> PendingFrame:
        layout = view.layout
        carried = min(layout.data_size, view.handle.byte_size)  # a block carrying less leaves zeros, as the bridge
        if carried:
            copy_rows(address, carried, view.handle.device_ptr, carried, carried, 1, _cuda_device(view), stream,
                      wait=False)
        return PendingFrame(view.header, layout.data_size, {"layout": layout, "carried": carried})

    def serialize(self, frame: PendingFrame, buffer: RingBuffer) -> memoryview:
        layout, carried = frame.fields["layout"], frame.fields["carried"]
        data = buffer.array((frame.length,))
        data[carried:] = 0
        fields = [self.types.new("sensor_msgs/msg/PointField", name=f.name, offset=f.offset, datatype=f.datatype,
                                 count=f.count) for f in layout.fields]
        msg = self.types.new(self.msgtype, header=_header(self.types, frame.header), height=layout.height,
                             width=layout.width, fields=fields, is_bigendian=bool(layout.is_bigendian),
                             point_step=layout.point_step, row_step=layout.row_step, data=data,
                             is_dense=bool(layout.is_dense))
        return self.types.serialize(msg, self.msgtype)

