"""``McapFile``: one ``.mcap`` file of a bag, written record by record, each message from where its bytes lie.

The MCAP format (mcap.dev/spec) frames records as an opcode, a little-endian uint64 length and the fields.
A message goes into a chunk (uncompressed, no CRC, as ``ros2 bag record``'s default writes them), with a
message index after it and a chunk index in the summary, so indexed readers (rosbag2's, the ``mcap``
library's, rosbags') find it.  A large message is a chunk of its own: its chunk header, message header
and the caller's buffers (the CDR prefix, the frame's memory, the suffix) go to the file in one
``os.writev``; only small messages are gathered in memory into a shared chunk.  No message is copied
into Python bytes on its way to the file.

What rosbag2's MCAP plugin writes is written too: the ``ros2`` profile, ``ros2msg`` schemas, ``cdr``
channels with ``offered_qos_profiles`` and ``topic_type_hash`` metadata, and a ``rosbag2`` metadata
record holding the bag's metadata as YAML (``serialized_metadata``), which ``ros2 bag info`` reads.

A disk that fills (or fails) mid-write costs the chunk being written, not the file: a chunk and its message
indexes go to the file in one append, the file is cut back to the end of the last whole one on an error,
and :meth:`McapFile.close` writes the summary over what is whole, dropping the last chunks while the summary
does not fit.  :attr:`McapFile.lost` counts the messages that cost, per channel.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MCAP_MAGIC", "McapFile"]

MCAP_MAGIC = b"\x89MCAP0\r\n"
_HEADER, _FOOTER, _SCHEMA, _CHANNEL, _MESSAGE, _CHUNK, _MESSAGE_INDEX, _CHUNK_INDEX = range(1, 9)
_STATISTICS, _METADATA, _METADATA_INDEX, _SUMMARY_OFFSET, _DATA_END = 0x0B, 0x0C, 0x0D, 0x0E, 0x0F
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
_MESSAGE_HEAD = struct.Struct("<BQHIQQ")  # opcode, length, channel, sequence, log time, publish time
_CHUNK_HEAD = struct.Struct("<BQQQQIIQ")  # opcode, length, start, end, uncompressed size, crc, "" (0), records


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def _map(pairs: Sequence[bytes]) -> bytes:
    body = b"".join(pairs)
    return struct.pack("<I", len(body)) + body


def _record(opcode: int, body: bytes) -> bytes:
    return struct.pack("<BQ", opcode, len(body)) + body


@dataclass
class _Chunk:
    """Small messages gathered for one chunk: their records and (log time, offset) per channel."""

    records: bytearray = field(default_factory=bytearray)
    index: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    start: int = 2**64 - 1
    end: int = 0

    def note(self, channel: int, log_time: int, offset: int) -> None:
        self.index.setdefault(channel, []).append((log_time, offset))
        self.start, self.end = min(self.start, log_time), max(self.end, log_time)

    def counts(self) -> dict[int, int]:
        return {channel: len(entries) for channel, entries in self.index.items()}


@dataclass(frozen=True)
class _WholeChunk:
    """A chunk in the file with its message indexes: where it starts, its chunk index, its messages per channel."""

    offset: int
    chunk_index: bytes
    counts: dict[int, int]
    start: int
    end: int


@dataclass(frozen=True)
class McapContents:
    """What a closed file holds: messages per channel and the log times of its first and last message."""

    counts: dict[int, int]
    start: int
    end: int


class McapFile:
    """Messages into a new file at ``path``; :meth:`close` writes the summary, the footer and the closing magic.

    Messages of more than ``chunk_bytes`` are chunks of their own, written from the caller's buffers;
    smaller ones share chunks of about that size.  ``bytes_written`` is the file's size so far.
    """

    def __init__(self, path: str | Path, library: str, chunk_bytes: int = 1 << 20) -> None:
        self.path = Path(path)
        self.chunk_bytes = chunk_bytes
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self.bytes_written = 0
        self.lost: dict[int, int] = {}  #: messages per channel that a write error cost
        self._whole_end = 0  # the file's end after its last whole record (or chunk and its indexes)
        self._schemas: list[bytes] = []
        self._channels: list[bytes] = []
        self._chunks: list[_WholeChunk] = []
        self._sequence: dict[int, int] = {}
        self._chunk = _Chunk()
        try:
            self._append([MCAP_MAGIC, _record(_HEADER, _string("ros2") + _string(library))])
        except OSError:  # not even the header fits: no file, rather than one no reader can open
            self.abort()
            self.path.unlink(missing_ok=True)
            raise

    @property
    def size(self) -> int:
        """The file's size once what is gathered for the next chunk is written too."""
        return self.bytes_written + len(self._chunk.records)

    @property
    def message_count(self) -> int:
        """Messages in whole chunks in the file (those gathered for the next chunk are not, yet)."""
        return sum(sum(c.counts.values()) for c in self._chunks)

    def contents(self) -> McapContents:
        """The messages of the whole chunks in the file, per channel, and their first and last log time."""
        counts = {channel: 0 for channel in self._sequence}
        for chunk in self._chunks:
            for channel, n in chunk.counts.items():
                counts[channel] += n
        if not self._chunks:
            return McapContents(counts, 0, 0)
        return McapContents(counts, min(c.start for c in self._chunks), max(c.end for c in self._chunks))

    def add_schema(self, name: str, encoding: str, data: str) -> int:
        """A message type and its definition; its id (1, 2, ...)."""
        schema_id = len(self._schemas) + 1
        body = struct.pack("<H", schema_id) + _string(name) + _string(encoding) + _string(data)
        record = _record(_SCHEMA, body)
        self._append([record])
        self._schemas.append(record)
        return schema_id

    def add_channel(self, topic: str, schema_id: int, message_encoding: str, metadata: dict[str, str]) -> int:
        """A topic of schema ``schema_id``; its id (1, 2, ...)."""
        channel_id = len(self._channels) + 1
        pairs = [_string(k) + _string(v) for k, v in sorted(metadata.items())]
        body = struct.pack("<HH", channel_id, schema_id) + _string(topic) + _string(message_encoding) + _map(pairs)
        record = _record(_CHANNEL, body)
        self._append([record])
        self._channels.append(record)
        self._sequence[channel_id] = 0
        return channel_id

    def write(self, channel_id: int, log_time: int, parts: Sequence[Any], size: int) -> None:
        """One message of ``size`` bytes, the concatenation of ``parts`` (buffers: bytes, memoryviews, numpy)."""
        if channel_id not in self._sequence:
            raise KeyError(f"channel {channel_id} was not added")
        if not 0 <= log_time < 2**64:
            raise ValueError(f"a log time of {log_time} ns")
        self._sequence[channel_id] += 1
        head = _MESSAGE_HEAD.pack(_MESSAGE, 22 + size, channel_id, self._sequence[channel_id] % 2**32, log_time,
                                  log_time)
        if size > self.chunk_bytes:
            self._flush_chunk()
            chunk = _Chunk()
            chunk.note(channel_id, log_time, 0)
            self._write_chunk(chunk, [head, *parts], len(head) + size)
        else:
            self._chunk.note(channel_id, log_time, len(self._chunk.records))
            self._chunk.records += head
            for part in parts:  # slice assignment: `+=` would hand a numpy part the addition
                self._chunk.records[len(self._chunk.records):] = memoryview(part).cast("B")
            if len(self._chunk.records) >= self.chunk_bytes:
                self._flush_chunk()

    def _flush_chunk(self) -> None:
        chunk, self._chunk = self._chunk, _Chunk()
        if chunk.index:
            self._write_chunk(chunk, [chunk.records], len(chunk.records))

    def _write_chunk(self, chunk: _Chunk, records: Sequence[Any], records_size: int) -> None:
        """The chunk record and one message index per channel, in one append; the chunk's index kept for the
        summary.  On an error the chunk's messages are lost (counted) and the file ends after the last whole one."""
        chunk_start = self.bytes_written
        head = _CHUNK_HEAD.pack(_CHUNK, 8 * 3 + 4 + 4 + 8 + records_size, chunk.start, chunk.end, records_size, 0, 0,
                                records_size)
        chunk_length = len(head) + records_size
        offsets: list[bytes] = []
        indexes: list[bytes] = []
        for channel, entries in chunk.index.items():
            offsets.append(struct.pack("<HQ", channel, chunk_start + chunk_length + sum(map(len, indexes))))
            body = struct.pack("<HI", channel, 16 * len(entries)) + b"".join(struct.pack("<QQ", *e) for e in entries)
            indexes.append(_record(_MESSAGE_INDEX, body))
        try:
            self._append([head, *records, *indexes])
        except OSError:
            self._count_lost(chunk.counts())
            raise
        chunk_index = _record(_CHUNK_INDEX, struct.pack("<QQQQ", chunk.start, chunk.end, chunk_start, chunk_length)
                              + _map(offsets) + struct.pack("<Q", sum(map(len, indexes))) + _string("")
                              + struct.pack("<QQ", records_size, records_size))
        self._chunks.append(_WholeChunk(chunk_start, chunk_index, chunk.counts(), chunk.start, chunk.end))

    def _count_lost(self, counts: dict[int, int]) -> None:
        for channel, n in counts.items():
            self.lost[channel] = self.lost.get(channel, 0) + n

    def close(self, serialized_metadata: str | Callable[[McapContents], str]) -> McapContents:
        """Write the last chunk, the ``rosbag2`` metadata record (``serialized_metadata``: the bag's metadata
        as YAML, or made from what the file holds), the summary and the footer; the file is complete and synced
        to the disk.  Where the disk takes no more, the chunk gathered is lost, and the last whole chunks are
        dropped until the summary fits; OSError only if it does not fit even without any chunk.  What the file
        holds, as closed."""
        with contextlib.suppress(OSError):  # counted lost; the file ends after its last whole chunk
            self._flush_chunk()
        while True:
            contents = self.contents()
            text = serialized_metadata if isinstance(serialized_metadata, str) else serialized_metadata(contents)
            try:
                self._finish(text, contents)
                return contents
            except OSError:
                if not self._chunks:
                    raise
                dropped = self._chunks.pop()
                self._count_lost(dropped.counts)
                self._cut(dropped.offset)

    def _finish(self, serialized_metadata: str, contents: McapContents) -> None:
        """The metadata record, the summary, the footer and the closing magic after the last whole chunk."""
        metadata_start = self.bytes_written
        metadata = _record(_METADATA, _string("rosbag2") + _map([_string("serialized_metadata")
                                                                 + _string(serialized_metadata)]))
        self._append([metadata, _record(_DATA_END, struct.pack("<I", 0))])
        summary_start = self.bytes_written
        count = sum(contents.counts.values())
        chunk_indexes = [c.chunk_index for c in self._chunks]
        statistics = struct.pack("<QHIIIIQQ", count, len(self._schemas), len(self._channels), 0, 1,
                                 len(chunk_indexes), contents.start, contents.end) \
            + _map([struct.pack("<HQ", c, n) for c, n in sorted(contents.counts.items())])
        groups = [(_SCHEMA, self._schemas), (_CHANNEL, self._channels), (_CHUNK_INDEX, chunk_indexes),
                  (_METADATA_INDEX, [_record(_METADATA_INDEX, struct.pack("<QQ", metadata_start, len(metadata))
                                             + _string("rosbag2"))]),
                  (_STATISTICS, [_record(_STATISTICS, statistics)])]
        summary = bytearray()
        offsets = bytearray()
        for opcode, records in groups:
            if records:
                group_start = summary_start + len(summary)
                for record in records:
                    summary += record
                offsets += _record(_SUMMARY_OFFSET, struct.pack("<BQQ", opcode, group_start,
                                                                summary_start + len(summary) - group_start))
        offset_start = summary_start + len(summary)
        footer_head = struct.pack("<BQQQ", _FOOTER, 20, summary_start, offset_start)
        crc = zlib.crc32(footer_head, zlib.crc32(offsets, zlib.crc32(summary)))
        self._append([summary, offsets, footer_head, struct.pack("<I", crc), MCAP_MAGIC])
        try:
            os.fsync(self._fd)
        except OSError:
            self._cut(metadata_start)
            raise
        self.abort()

    def abort(self) -> None:
        """Close the file as it is (no summary: readers that scan it still find every whole message)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _append(self, parts: Sequence[Any]) -> None:
        """All of ``parts`` appended as one whole: on an error the file is cut back to where it was."""
        try:
            self._write(parts)
        except OSError:
            self._cut(self._whole_end)
            raise
        self._whole_end = self.bytes_written

    def _cut(self, end: int) -> None:
        """The file ends at ``end`` again (what was written after it freed on the disk)."""
        os.ftruncate(self._fd, end)
        os.lseek(self._fd, end, os.SEEK_SET)
        self.bytes_written = self._whole_end = end

    def _write(self, parts: Sequence[Any]) -> None:
        """All of ``parts`` appended with as few ``writev`` calls as the kernel allows, resumed after a short one."""
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        while views:
            batch = views[:_IOV_MAX]
            written = os.writev(self._fd, batch)
            if written == 0:
                raise OSError(f"{self.path}: the disk took no byte")
            self.bytes_written += written
            while written and views:
                if written >= len(views[0]):
                    written -= len(views.pop(0))
                else:
                    views[0] = views[0][written:]
                    written = 0
