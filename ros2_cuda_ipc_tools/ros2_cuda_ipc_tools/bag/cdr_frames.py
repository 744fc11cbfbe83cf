"""The CDR of ``sensor_msgs/Image`` and ``PointCloud2`` around a payload that stays where it is.

A frame's bytes are the ``data`` field, nearly all of the message.  :func:`image_cdr` and :func:`cloud_cdr`
encode what comes before it (the encapsulation header, the header, the geometry, the sequence length)
and after it (PointCloud2's ``is_dense``), so a writer puts ``prefix``, the frame's own memory and
``suffix`` side by side (``os.writev``) and never builds the message.  The bytes are what rosbags'
serializer makes for the same message (padding zeroed), which rclpy deserializes.

:func:`parse_image` and :func:`parse_cloud` are the reverse for a bag's messages, which are hostile: every
length is checked against the bytes there are before anything is read by it, and ``data`` is a view of
the message's own bytes, never a copy.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CdrField",
    "CdrFrame",
    "CdrStamp",
    "ParsedCloud",
    "ParsedImage",
    "cloud_cdr",
    "image_cdr",
    "parse_cloud",
    "parse_image",
]

#: CDR, little endian, as every ROS 2 publisher on this machine sends it.
_LITTLE_ENDIAN = b"\x00\x01\x00\x00"
_ENCAPSULATIONS = {b"\x00\x01": "<", b"\x00\x00": ">"}


@dataclass(frozen=True)
class CdrStamp:
    """A ``std_msgs/Header``: stamp and frame."""

    sec: int
    nanosec: int
    frame_id: str


@dataclass(frozen=True)
class CdrField:
    """One ``sensor_msgs/PointField``."""

    name: str
    offset: int
    datatype: int
    count: int


@dataclass(frozen=True)
class CdrFrame:
    """The bytes of a message but its payload: ``prefix`` + payload (``payload_bytes``) + ``suffix``."""

    prefix: bytes
    payload_bytes: int
    suffix: bytes = b""

    @property
    def size(self) -> int:
        return len(self.prefix) + self.payload_bytes + len(self.suffix)


class _Encoder:
    """CDR fields appended with their alignment (counted from after the encapsulation header)."""

    def __init__(self) -> None:
        self._out = bytearray(_LITTLE_ENDIAN)

    def _align(self, size: int) -> None:
        self._out += b"\0" * (-(len(self._out) - 4) % size)

    def put(self, fmt: str, *values: Any) -> None:
        self._align(struct.calcsize(fmt))
        self._out += struct.pack("<" + fmt, *values)

    def string(self, text: str) -> None:
        data = text.encode() + b"\0"
        self.put("I", len(data))
        self._out += data

    def header(self, stamp: CdrStamp) -> None:
        self.put("i", stamp.sec)
        self.put("I", stamp.nanosec)
        self.string(stamp.frame_id)

    def bytes(self) -> bytes:
        return bytes(self._out)


def image_cdr(stamp: CdrStamp, height: int, width: int, encoding: str, is_bigendian: bool, step: int,
              data_bytes: int) -> CdrFrame:
    """The CDR around an Image's ``data_bytes`` of ``data``."""
    out = _Encoder()
    out.header(stamp)
    out.put("I", height)
    out.put("I", width)
    out.string(encoding)
    out.put("B", int(is_bigendian))
    out.put("I", step)
    out.put("I", data_bytes)
    return CdrFrame(out.bytes(), data_bytes)


def cloud_cdr(stamp: CdrStamp, height: int, width: int, fields: list[CdrField], is_bigendian: bool,
              point_step: int, row_step: int, data_bytes: int, is_dense: bool) -> CdrFrame:
    """The CDR around a PointCloud2's ``data_bytes`` of ``data`` (``is_dense`` comes after them)."""
    out = _Encoder()
    out.header(stamp)
    out.put("I", height)
    out.put("I", width)
    out.put("I", len(fields))
    for field in fields:
        out.string(field.name)
        out.put("I", field.offset)
        out.put("B", field.datatype)
        out.put("I", field.count)
    out.put("B", int(is_bigendian))
    out.put("I", point_step)
    out.put("I", row_step)
    out.put("I", data_bytes)
    return CdrFrame(out.bytes(), data_bytes, bytes([int(is_dense)]))


class _Decoder:
    """Reads CDR fields from a message's bytes; ValueError naming what does not fit."""

    def __init__(self, data: memoryview, what: str) -> None:
        self.what = what
        self.data = data
        if len(data) < 4 or bytes(data[:2]) not in _ENCAPSULATIONS:
            raise ValueError(f"{what}: not CDR (encapsulation {bytes(data[:4]).hex() or 'missing'})")
        self.order = _ENCAPSULATIONS[bytes(data[:2])]
        self.position = 4

    def get(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self.position += -(self.position - 4) % size
        if self.position + size > len(self.data):
            raise ValueError(f"{self.what}: the message ends inside its fields ({len(self.data)} bytes)")
        (value,) = struct.unpack_from(self.order + fmt, self.data, self.position)
        self.position += size
        return value

    def length(self, item_bytes: int) -> int:
        """A sequence's or string's length, refused when its items could not fit in the bytes left."""
        count = int(self.get("I"))
        if count * item_bytes > len(self.data) - self.position:
            raise ValueError(f"{self.what}: a length of {count} is beyond the message's {len(self.data)} bytes")
        return count

    def string(self) -> str:
        size = self.length(1)
        raw = bytes(self.data[self.position:self.position + size])
        self.position += size
        if not raw or raw[-1] != 0:
            raise ValueError(f"{self.what}: a string that does not end in NUL")
        try:
            return raw[:-1].decode()
        except UnicodeDecodeError:
            raise ValueError(f"{self.what}: a string that is not UTF-8") from None

    def header(self) -> CdrStamp:
        return CdrStamp(int(self.get("i")), int(self.get("I")), self.string())

    def octets(self) -> memoryview:
        size = self.length(1)
        view = self.data[self.position:self.position + size]
        self.position += size
        return view


@dataclass(frozen=True)
class ParsedImage:
    """A bag's Image: its fields, and ``data`` as a view of the message's bytes."""

    header: CdrStamp
    height: int
    width: int
    encoding: str
    is_bigendian: bool
    step: int
    data: memoryview


@dataclass(frozen=True)
class ParsedCloud:
    """A bag's PointCloud2: its fields, and ``data`` as a view of the message's bytes."""

    header: CdrStamp
    height: int
    width: int
    fields: list[CdrField]
    is_bigendian: bool
    point_step: int
    row_step: int
    data: memoryview
    is_dense: bool


def parse_image(raw: bytes | memoryview) -> ParsedImage:
    """The Image in ``raw`` (its CDR); ValueError for bytes that are not one."""
    cdr = _Decoder(memoryview(raw).cast("B"), "an Image")
    header = cdr.header()
    height, width = int(cdr.get("I")), int(cdr.get("I"))
    encoding = cdr.string()
    is_bigendian = bool(cdr.get("B"))
    step = int(cdr.get("I"))
    return ParsedImage(header, height, width, encoding, is_bigendian, step, cdr.octets())


def parse_cloud(raw: bytes | memoryview) -> ParsedCloud:
    """The PointCloud2 in ``raw`` (its CDR); ValueError for bytes that are not one."""
    cdr = _Decoder(memoryview(raw).cast("B"), "a PointCloud2")
    header = cdr.header()
    height, width = int(cdr.get("I")), int(cdr.get("I"))
    fields = []
    for _ in range(cdr.length(13)):  # a PointField is 13 bytes at least: name length, NUL, offset, type, count
        fields.append(CdrField(cdr.string(), int(cdr.get("I")), int(cdr.get("B")), int(cdr.get("I"))))
    is_bigendian = bool(cdr.get("B"))
    point_step, row_step = int(cdr.get("I")), int(cdr.get("I"))
    data = cdr.octets()
    is_dense = bool(cdr.get("B"))
    return ParsedCloud(header, height, width, fields, is_bigendian, point_step, row_step, data, is_dense)
