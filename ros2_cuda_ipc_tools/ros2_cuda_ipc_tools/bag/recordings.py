"""What the recorder does with one topic's messages, by kind: a ``GpuImage`` becomes ``sensor_msgs/Image`` (or
``CompressedImage``), a ``GpuPointCloud2`` becomes ``PointCloud2``, anything else is kept as it arrived.

A GPU recording has three steps.  :meth:`GpuRecording.prepare` (in the subscription callback, the frame
leased) encodes the message's CDR but its payload (:mod:`.cdr_frames`) and says whether the frame is
written *in place*: a dense host frame goes to the file from the pool's own block, under its lease, and
nothing is copied in this process.  Any other frame is copied once by :meth:`download` into a ring buffer
(page-locked for CUDA frames, an asynchronous copy on the side stream), behind its CDR prefix and before
its suffix, so the buffer holds the whole message and its lease ends with the copy.  :meth:`parts`, on
the writer thread once the copy is done, gives the buffers whose concatenation is the message.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ros2_cuda_ipc_core import InvalidDescriptorError, copy_rows, copy_strided
from ros2_cuda_ipc_image import ImageReader, ImageView, generic_encoding
from ros2_cuda_ipc_pointcloud import PointCloudReader, PointCloudView

from .cdr_frames import CdrField, CdrFrame, CdrStamp, cloud_cdr, image_cdr
from .frame_ring import RingBuffer, RingKind
from .message_types import MessageTypes

__all__ = ["CloudRecording", "CompressedImageRecording", "GpuRecording", "ImageRecording", "JpegEncoder",
           "PendingFrame"]


class JpegEncoder(Protocol):
    """The encoder of the compressed CPU twins (``ros2_cuda_ipc_core.encode_jpeg``, issue 17)."""

    def __call__(self, image: Any, order: Any, quality: int = 80, *, stream: Any = None) -> bytes: ...


@dataclass
class PendingFrame:
    """A frame on its way to the bag: its CDR around the payload, and where the payload is.

    ``source`` is set for a frame written in place: a view of the leased block (the lease lasts as long as
    the view); otherwise the payload is copied into a ring buffer of ``ring_bytes``.
    """

    header: Any
    cdr: CdrFrame
    carried: int  #: payload bytes the frame has; a cloud block that carries less is completed by zeros
    ring_bytes: int
    source: Any = None
    fields: dict[str, Any] = field(default_factory=dict)

    def release(self) -> None:
        """Drop the view of the block (its lease) of a frame written in place."""
        self.source = None


def _stamp(header: Any) -> CdrStamp:
    return CdrStamp(int(header.stamp.sec), int(header.stamp.nanosec), str(header.frame_id))


def _cuda_device(view: Any) -> int | None:
    return int(view.handle.device_id) if view.memory == "cuda" else None


class GpuRecording:
    """The common part: a typed reader of this topic and the rosbags type store."""

    msgtype = ""
    #: Where CUDA frames are copied to: page-locked host memory, unless the recording encodes on the GPU.
    cuda_ring: RingKind = "pinned"

    def __init__(self, types: MessageTypes, reader: Any) -> None:
        self.types = types
        self.reader = reader

    def prepare(self, view: Any, in_place: bool) -> PendingFrame:
        """The frame's CDR; written in place if ``in_place`` allows it and the frame is a dense host frame."""
        frame = self.encode(view)
        if in_place and view.memory == "host" and self.dense(view):
            frame.source = view.handle.view((frame.carried,), np.uint8) if frame.carried else np.empty(0, np.uint8)
        return frame

    def encode(self, view: Any) -> PendingFrame:
        raise NotImplementedError

    def dense(self, view: Any) -> bool:
        """Whether the block holds the payload as the message does, from its first byte."""
        raise NotImplementedError

    def copy_payload(self, view: Any, address: int, stream: int) -> None:
        """Enqueue the copy of the payload to ``address`` on ``stream`` (a host frame is copied now)."""
        raise NotImplementedError

    def download(self, view: Any, frame: PendingFrame, buffer: RingBuffer, stream: int) -> None:
        """Put the whole message into ``buffer``: prefix and suffix now, the payload copied on ``stream``."""
        prefix, suffix = frame.cdr.prefix, frame.cdr.suffix
        message = buffer.array((frame.cdr.size,))
        message[:len(prefix)] = np.frombuffer(prefix, np.uint8)
        end = len(prefix) + frame.cdr.payload_bytes
        message[len(prefix) + frame.carried:end] = 0
        message[end:] = np.frombuffer(suffix, np.uint8)
        if frame.carried:
            self.copy_payload(view, buffer.address + len(prefix), stream)

    def parts(self, frame: PendingFrame, buffer: RingBuffer | None) -> list[Any]:
        """The buffers whose concatenation is the message (the copy into ``buffer``, if any, is done)."""
        if frame.source is None:
            assert buffer is not None
            return [buffer.array((frame.cdr.size,))]
        parts = [frame.cdr.prefix, frame.source]
        if frame.carried < frame.cdr.payload_bytes:
            parts.append(bytes(frame.cdr.payload_bytes - frame.carried))
        return [*parts, frame.cdr.suffix]


def _image_geometry(view: ImageView) -> tuple[int, int, int, str]:
    layout = view.layout
    rows, cols, channels = layout.shape
    encoding = layout.encoding or generic_encoding(layout.dtype, channels)
    if encoding is None:
        raise InvalidDescriptorError(f"{channels} x {layout.dtype} has no sensor_msgs encoding")
    return rows, cols, channels, encoding


class ImageRecording(GpuRecording):
    """``GpuImage`` to ``sensor_msgs/Image``: rows made dense (``step`` = row bytes), any layout, one copy at most."""

    msgtype = "sensor_msgs/msg/Image"

    def __init__(self, types: MessageTypes, reader: ImageReader) -> None:
        super().__init__(types, reader)

    def encode(self, view: ImageView) -> PendingFrame:
        rows, cols, _, encoding = _image_geometry(view)
        step = view.layout.row_bytes
        cdr = image_cdr(_stamp(view.header), rows, cols, encoding, sys.byteorder == "big", step, rows * step)
        return PendingFrame(view.header, cdr, rows * step, cdr.size)

    def dense(self, view: ImageView) -> bool:
        layout = view.layout
        item = layout.dtype.itemsize
        return tuple(layout.strides) == (layout.row_bytes, layout.shape[2] * item, item)

    def copy_payload(self, view: ImageView, address: int, stream: int) -> None:
        layout = view.layout
        item = layout.dtype.itemsize
        copy_strided(address, (layout.row_bytes, layout.shape[2] * item, item), view.handle.device_ptr, layout.strides,
                     layout.shape, item, _cuda_device(view), stream, wait=False)


#: Image encodings JPEG can take, and the channel order the encoder is told.
_JPEG_ORDERS = {"rgb8": "rgb", "bgr8": "bgr", "rgba8": "rgba", "bgra8": "bgra", "mono8": "mono"}


class CompressedImageRecording(ImageRecording):
    """``GpuImage`` to ``sensor_msgs/CompressedImage``, JPEG, ``format`` as image_transport's compressed plugin
    writes it (``rgb8; jpeg compressed bgr8``), so its tools decode it.  The ring buffer holds the raw rows;
    the JPEG is encoded and serialized (rosbags) on the writer thread: it is small."""

    msgtype = "sensor_msgs/msg/CompressedImage"

    def __init__(self, types: MessageTypes, reader: ImageReader, encode: JpegEncoder, quality: int,
                 on_gpu: bool = False) -> None:
        super().__init__(types, reader)
        self.encode_jpeg = encode
        self.quality = quality
        if on_gpu:  # CUDA frames: copied on the GPU and encoded there (nvJPEG); only the JPEG reaches the host
            self.cuda_ring = "device"

    def prepare(self, view: ImageView, in_place: bool) -> PendingFrame:
        if (view.layout.encoding or "") not in _JPEG_ORDERS:
            raise InvalidDescriptorError(f"a {view.layout.encoding or view.layout.dtype} image cannot be JPEG "
                                         f"encoded (one of {', '.join(_JPEG_ORDERS)})")
        rows, cols, channels, encoding = _image_geometry(view)
        size = rows * view.layout.row_bytes
        return PendingFrame(view.header, CdrFrame(b"", size), size, size,
                            fields={"height": rows, "width": cols, "channels": channels, "encoding": encoding})

    def download(self, view: ImageView, frame: PendingFrame, buffer: RingBuffer, stream: int) -> None:
        self.copy_payload(view, buffer.address, stream)

    def parts(self, frame: PendingFrame, buffer: RingBuffer | None) -> list[Any]:
        assert buffer is not None
        f = frame.fields
        shape = (f["height"], f["width"]) if f["channels"] == 1 else (f["height"], f["width"], f["channels"])
        order = _JPEG_ORDERS[f["encoding"]]
        jpeg = self.encode_jpeg(buffer.array(shape), order, self.quality)
        written = "mono8" if order == "mono" else "bgr8"
        stamp = self.types.new("builtin_interfaces/msg/Time", sec=int(frame.header.stamp.sec),
                               nanosec=int(frame.header.stamp.nanosec))
        msg = self.types.new(self.msgtype,
                             header=self.types.new("std_msgs/msg/Header", stamp=stamp,
                                                   frame_id=str(frame.header.frame_id)),
                             format=f"{f['encoding']}; jpeg compressed {written}",
                             data=np.frombuffer(jpeg, dtype=np.uint8))
        return [self.types.serialize(msg, self.msgtype)]


class CloudRecording(GpuRecording):
    """``GpuPointCloud2`` to ``sensor_msgs/PointCloud2``: the bytes, point layout and padding as they are."""

    msgtype = "sensor_msgs/msg/PointCloud2"

    def __init__(self, types: MessageTypes, reader: PointCloudReader) -> None:
        super().__init__(types, reader)

    def encode(self, view: PointCloudView) -> PendingFrame:
        layout = view.layout
        carried = min(layout.data_size, view.handle.byte_size)  # a block carrying less leaves zeros, as the bridge
        fields = [CdrField(f.name, f.offset, f.datatype, f.count) for f in layout.fields]
        cdr = cloud_cdr(_stamp(view.header), layout.height, layout.width, fields, bool(layout.is_bigendian),
                        layout.point_step, layout.row_step, layout.data_size, bool(layout.is_dense))
        return PendingFrame(view.header, cdr, carried, cdr.size)

    def dense(self, view: PointCloudView) -> bool:
        return True  # a cloud's block is its data, rows, padding and all

    def copy_payload(self, view: PointCloudView, address: int, stream: int) -> None:
        carried = min(view.layout.data_size, view.handle.byte_size)
        copy_rows(address, carried, view.handle.device_ptr, carried, carried, 1, _cuda_device(view), stream,
                  wait=False)
