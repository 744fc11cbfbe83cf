"""Hostile MCAP files for the bag tests, written by hand: compressed chunks that lie about their size, floods of empty
records, chunk indexes that all claim one start time.  Each builder writes a single ``.mcap`` file (bag_play takes
one) with an ``Image`` channel, a chunk index and message indexes per chunk, statistics and a footer, as rosbag2's
MCAP plugin lays them out, so rosbags' indexed reader goes the path it goes for a real bag.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

from ros2_cuda_ipc_tools.bag.cdr_frames import CdrStamp, image_cdr

TOPIC = "/bomb/image"
MAGIC = b"\x89MCAP0\r\n"
BASE = 10**18
MiB = 1 << 20


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def _record(opcode: int, body: bytes) -> bytes:
    return struct.pack("<BQ", opcode, len(body)) + body


def message_head(log_time: int, data_bytes: int, channel: int = 1, sequence: int = 0) -> bytes:
    """A message record up to its data (``data_bytes`` follow)."""
    return struct.pack("<BQHIQQ", 5, 22 + data_bytes, channel, sequence, log_time, log_time)


def image_message(index: int, width: int, height: int, fill: int = 0) -> tuple[bytes, int]:
    """The CDR of an rgba8 image (a frame of ``fill`` bytes) as (prefix, payload bytes); the suffix is empty."""
    frame = image_cdr(CdrStamp(1000 + index, index, "bomb"), height, width, "rgba8", False, width * 4,
                      width * height * 4)
    return frame.prefix, frame.payload_bytes


def zstd_of(pieces: Iterable[bytes | tuple[int, int]]) -> bytes:
    """zstd of the concatenation of ``pieces``: bytes, or (count, byte) for ``count`` copies of one byte, streamed
    (a 2 GiB run of zeros is never in memory)."""
    compressor = zstd.ZstdCompressor(level=1)
    out = bytearray()
    for piece in pieces:
        if isinstance(piece, tuple):
            count, value = piece
            run = memoryview(bytes([value]) * min(count, 16 * MiB))
            while count > 0:
                out += compressor.compress(run[:min(count, len(run))])
                count -= len(run)
        else:
            out += compressor.compress(piece)
    out += compressor.flush()
    return bytes(out)


@dataclass
class Chunk:
    """A chunk as the file will state it: its compressed records, the sizes and times it claims, and the message
    index entries (log time, offset into the uncompressed records) of channel 1."""

    compressed: bytes
    uncompressed_size: int
    start: int
    end: int
    index: list[tuple[int, int]] = field(default_factory=list)
    compression: str = "zstd"


def write_mcap(path: Path, chunks: list[Chunk], msgtype: str = "sensor_msgs/msg/Image") -> Path:
    """A ``.mcap`` file of ``chunks`` on one channel, ``TOPIC`` of ``msgtype``, indexed and summarised."""
    schema = _record(3, struct.pack("<H", 1) + _string(msgtype) + _string("ros2msg") + _string(""))
    channel = _record(4, struct.pack("<HH", 1, 1) + _string(TOPIC) + _string("cdr") + struct.pack("<I", 0))
    out = bytearray(MAGIC + _record(1, _string("ros2") + _string("mcap_bombs")) + schema + channel)
    chunk_indexes = []
    for chunk in chunks:
        chunk_start = len(out)
        body = (struct.pack("<QQQI", chunk.start, chunk.end, chunk.uncompressed_size, 0) + _string(chunk.compression)
                + struct.pack("<Q", len(chunk.compressed)) + chunk.compressed)
        out += _record(6, body)
        chunk_length = len(out) - chunk_start
        index_start = len(out)
        entries = b"".join(struct.pack("<QQ", t, o) for t, o in chunk.index)
        out += _record(7, struct.pack("<HI", 1, len(entries)) + entries)
        offsets = struct.pack("<HQ", 1, index_start)
        chunk_indexes.append(_record(8, struct.pack("<QQQQ", chunk.start, chunk.end, chunk_start, chunk_length)
                                     + struct.pack("<I", len(offsets)) + offsets
                                     + struct.pack("<Q", len(out) - index_start) + _string(chunk.compression)
                                     + struct.pack("<QQ", len(chunk.compressed), chunk.uncompressed_size)))
    out += _record(15, struct.pack("<I", 0))
    summary_start = len(out)
    count = sum(len(c.index) for c in chunks)
    start = min((c.start for c in chunks), default=0)
    end = max((c.end for c in chunks), default=0)
    statistics = _record(11, struct.pack("<QHIIIIQQ", count, 1, 1, 0, 0, len(chunks), start, end)
                         + struct.pack("<I", 10) + struct.pack("<HQ", 1, count))
    out += schema + channel + b"".join(chunk_indexes) + statistics
    out += _record(2, struct.pack("<QQI", summary_start, 0, 0)) + MAGIC
    path.write_bytes(out)
    return path


def bomb(path: Path, inflated: int = 2 << 30) -> Path:
    """One image message whose frame is ``inflated`` bytes of zeros, honestly stated: a few KiB on disk."""
    width = 4096
    height = max((inflated - 200) // (width * 4), 1)
    prefix, payload = image_message(0, width, height)
    head = message_head(BASE, len(prefix) + payload)
    size = len(head) + len(prefix) + payload
    return write_mcap(path, [Chunk(zstd_of([head, prefix, (payload, 0)]), size, BASE, BASE, [(BASE, 0)])])


def lying_size(path: Path, inflated: int = 1 << 30, stated: int = 4096) -> Path:
    """A chunk that states ``stated`` uncompressed bytes and inflates to ``inflated``."""
    width = 4096
    height = max((inflated - 200) // (width * 4), 1)
    prefix, payload = image_message(0, width, height)
    head = message_head(BASE, len(prefix) + payload)
    return write_mcap(path, [Chunk(zstd_of([head, prefix, (payload, 0)]), stated, BASE, BASE, [(BASE, 0)])])


def empty_records(path: Path, records: int = 20_000_000, opcode: int = 0x80) -> Path:
    """One chunk of ``records`` records of no content (``opcode``, length 0; 0x05 makes them messages too short to
    hold a message header) and one real message index entry: a few KiB on disk."""
    record = struct.pack("<BQ", opcode, 0)
    pieces = [record * 100_000] * (records // 100_000)
    return write_mcap(path, [Chunk(zstd_of(pieces), len(record) * 100_000 * len(pieces), BASE, BASE, [(BASE, 0)])])


def empty_messages(path: Path, messages: int = 4_000_000) -> Path:
    """One chunk of ``messages`` message records of channel 1 with no data: every one is a message to play."""
    records = b"".join(message_head(BASE + i, 0) for i in range(1000))
    return write_mcap(path, [Chunk(zstd_of([records] * (messages // 1000)), len(records) * (messages // 1000), BASE,
                                   BASE + 999, [(BASE, 0)])])


def one_start_time(path: Path, frames: int = 100, frame_bytes: int = 8 * MiB, honest: bool = False) -> Path:
    """``frames`` honest rgba8 frames of ``frame_bytes``, a chunk each 0.1 s apart, whose chunk indexes all state the
    first frame's time as their start (``honest``: their own)."""
    width = 1024
    height = frame_bytes // (width * 4)
    chunks = []
    for i in range(frames):
        prefix, payload = image_message(i, width, height)
        time = BASE + i * 100_000_000
        head = message_head(time, len(prefix) + payload, sequence=i)
        size = len(head) + len(prefix) + payload
        chunks.append(Chunk(zstd_of([head, prefix, (payload, i % 256)]), size, time if honest else BASE, time,
                            [(time, 0)]))
    return write_mcap(path, chunks)
