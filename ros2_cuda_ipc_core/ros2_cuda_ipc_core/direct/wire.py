"""The direct path's bytes: the subscribe request a reader sends after its handout, and the records a pool sends back.

The pool's socket protocol (see :mod:`..pool.fd_server`) hands out the pool's fds and then waits for the peer to
close.  A direct subscriber instead sends one request, ``SUBSCRIBE``, naming the topic it reads, and keeps
the connection: from then on the publisher writes a record there for every publication on that topic.

Records are length-prefixed (``u32`` length of what follows, then a ``u8`` kind):

- ``TEMPLATE``: ``u32`` template id, then the CDR of one whole typed message.  Everything a frame does not
  carry (the layout's fields, the pool's own fields) comes from the latest template; it is sent again only
  when those change, so no frame pays a ROS message conversion on either side.
- ``FRAME``: ``u32`` template id, block, uid, byte size, the header stamp, the block's ready event and the
  header's ``frame_id`` (``u16`` length, then UTF-8): what may change from one publication to the next,
  packed by ``struct``.
- ``REFUSED``: why the pool will not keep this channel (UTF-8, at most ``MAX_REASON_BYTES``); the pool closes
  the connection after it, and the subscriber says so.

A publication whose message a record cannot carry (a ``frame_id`` over ``MAX_FRAME_ID_BYTES``, a template over
``MAX_TEMPLATE_BYTES``: :func:`fits`) goes by DDS alone.  A subscriber sends nothing after its request.

Everything here is input from a peer: sizes are bounded before anything is allocated, and a record that is
malformed ends the connection (the frames keep coming over DDS).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import InvalidDescriptorError

#: What a subscriber sends after its handout: magic, version, reserved byte, topic length; the topic (UTF-8) follows.
SUBSCRIBE = struct.Struct("<4sBBH")
SUBSCRIBE_MAGIC = b"R2CD"
VERSION = 1
MAX_TOPIC_BYTES = 1024

#: Record prefix: bytes that follow (kind included), kind.
PREFIX = struct.Struct("<IB")
KIND_TEMPLATE, KIND_FRAME, KIND_REFUSED = 1, 2, 3
MAX_REASON_BYTES = 256
_TEMPLATE_ID = struct.Struct("<I")
#: template id, block_id, uid, byte_size, stamp.sec, stamp.nanosec, event_handle, frame_id length (then the frame_id)
_FRAME = struct.Struct("<IIQQiI64sH")
MAX_FRAME_ID_BYTES = 4096
#: The largest template a subscriber accepts (a typed message's CDR without payload is a few hundred bytes;
#: a point cloud with many fields or a tensor with many dimensions stays far below this).
MAX_TEMPLATE_BYTES = 1 << 16
MAX_RECORD_BYTES = PREFIX.size + _TEMPLATE_ID.size + MAX_TEMPLATE_BYTES


def subscribe_request(topic: str) -> bytes:
    """The request that turns a handout connection into a direct channel for ``topic``."""
    name = topic.encode()
    if not 0 < len(name) <= MAX_TOPIC_BYTES:
        raise ValueError(f"topic {topic!r}: 1 to {MAX_TOPIC_BYTES} bytes of UTF-8")
    return SUBSCRIBE.pack(SUBSCRIBE_MAGIC, VERSION, 0, len(name)) + name


#: The most bytes a subscribe request takes: a server reads no more than this from a peer.
MAX_REQUEST_BYTES = SUBSCRIBE.size + MAX_TOPIC_BYTES
#: What :func:`parse_request` says of bytes that are the start of a request but not all of it yet.
INCOMPLETE = ""


def parse_subscribe(data: bytes) -> str | None:
    """The topic a subscribe request names; None if ``data`` is not one (the connection is then closed)."""
    topic = parse_request(data)
    return topic or None


def parse_request(data: bytes | bytearray) -> str | None:
    """What the bytes a peer sent so far are: a whole request (its topic), the start of one (:data:`INCOMPLETE`:
    read on, up to :data:`MAX_REQUEST_BYTES`), or not a request (None: close the connection)."""
    head = bytes(data[:SUBSCRIBE.size])
    if not (SUBSCRIBE_MAGIC + bytes([VERSION])).startswith(head[:5]):
        return None
    if len(data) < SUBSCRIBE.size:
        return INCOMPLETE
    _magic, _version, _reserved, length = SUBSCRIBE.unpack(head)
    if not 0 < length <= MAX_TOPIC_BYTES or len(data) > SUBSCRIBE.size + length:
        return None
    if len(data) < SUBSCRIBE.size + length:
        return INCOMPLETE
    try:
        return bytes(data[SUBSCRIBE.size:]).decode()
    except UnicodeDecodeError:
        return None


def fits(frame_id: bytes, template_bytes: int = 0) -> str | None:
    """Why a publication with ``frame_id`` (and a template of ``template_bytes``) cannot go in a record; None if it can."""
    if len(frame_id) > MAX_FRAME_ID_BYTES:
        return f"a {len(frame_id)}-byte frame_id (a direct frame carries {MAX_FRAME_ID_BYTES} at most)"
    if template_bytes > MAX_TEMPLATE_BYTES:
        return f"a {template_bytes}-byte message (a direct template carries {MAX_TEMPLATE_BYTES} at most)"
    return None


def template_record(template_id: int, cdr: bytes) -> bytes:
    if len(cdr) > MAX_TEMPLATE_BYTES:
        raise ValueError(f"a {len(cdr)}-byte message is too large for a direct template ({MAX_TEMPLATE_BYTES} at most)")
    return PREFIX.pack(1 + _TEMPLATE_ID.size + len(cdr), KIND_TEMPLATE) + _TEMPLATE_ID.pack(template_id) + cdr


def frame_record(template_id: int, block_id: int, uid: int, byte_size: int, sec: int, nanosec: int,
                 event_handle: bytes, frame_id: bytes) -> bytes:
    if len(frame_id) > MAX_FRAME_ID_BYTES:
        raise ValueError(f"a {len(frame_id)}-byte frame_id is too long for a direct frame ({MAX_FRAME_ID_BYTES} at most)")
    return PREFIX.pack(1 + _FRAME.size + len(frame_id), KIND_FRAME) + _FRAME.pack(
        template_id, block_id, uid, byte_size, sec, nanosec, event_handle, len(frame_id)) + frame_id


def refused_record(reason: str) -> bytes:
    text = reason.encode()[:MAX_REASON_BYTES]
    return PREFIX.pack(1 + len(text), KIND_REFUSED) + text


@dataclass(frozen=True)
class Refused:
    """The pool will not keep the channel, and why."""

    reason: str


@dataclass(frozen=True)
class Template:
    template_id: int
    cdr: bytes


class Frame(NamedTuple):
    """One publication (a tuple: built for every frame, it must cost nothing to make)."""

    template_id: int
    block_id: int
    uid: int
    byte_size: int
    sec: int
    nanosec: int
    event_handle: bytes
    frame_id: str


class RecordReader:
    """Splits a stream of records into :class:`Template`, :class:`Frame` and :class:`Refused` values; raises
    InvalidDescriptorError for anything else (a length out of bounds, an unknown kind, a short record)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Template | Frame | Refused]:
        buffer = self._buffer
        buffer += data
        records: list[Template | Frame | Refused] = []
        start = 0
        while len(buffer) - start >= PREFIX.size:
            length, kind = PREFIX.unpack_from(buffer, start)
            if not 1 <= length <= MAX_RECORD_BYTES - 4:
                raise InvalidDescriptorError(f"a direct record claims {length} bytes: out of bounds")
            end = start + 4 + length
            if end > len(buffer):
                break
            body = bytes(buffer[start + PREFIX.size:end])
            records.append(_record(kind, body))
            start = end
        del buffer[:start]
        return records


def _record(kind: int, body: bytes) -> Template | Frame | Refused:
    if kind == KIND_FRAME:
        if len(body) < _FRAME.size:
            raise InvalidDescriptorError(f"a direct frame record of {len(body)} bytes, at least {_FRAME.size} expected")
        template_id, block_id, uid, byte_size, sec, nanosec, event_handle, length = _FRAME.unpack_from(body)
        if len(body) != _FRAME.size + length:
            raise InvalidDescriptorError(f"a direct frame record of {len(body)} bytes names a {length}-byte frame_id")
        try:
            return Frame(template_id, block_id, uid, byte_size, sec, nanosec, event_handle, body[_FRAME.size:].decode())
        except UnicodeDecodeError:
            raise InvalidDescriptorError("a direct frame record's frame_id is not UTF-8") from None
    if kind == KIND_TEMPLATE:
        if len(body) < _TEMPLATE_ID.size:
            raise InvalidDescriptorError("a direct template record without its id")
        return Template(_TEMPLATE_ID.unpack_from(body)[0], body[_TEMPLATE_ID.size:])
    if kind == KIND_REFUSED:
        return Refused(body[:MAX_REASON_BYTES].decode(errors="replace"))
    raise InvalidDescriptorError(f"a direct record of unknown kind {kind}")
