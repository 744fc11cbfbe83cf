"""MCAP chunks read within bounds: a bag is a file, and a file is hostile input.

rosbags (pinned) decompresses a chunk whole, whatever its size, walks every record of it in Python, and opens
every chunk whose index states a start time before the next message: a 20 KiB bag inflated to 2 GiB, a chunk
stating 4 KiB that holds 1 GiB, 5 KiB of empty records took 21 s, and 100 chunk indexes all stating one start
time held all 100 frames at once (2.5 GiB).  Here:

- a chunk may state at most :attr:`ChunkBounds.chunk_bytes` uncompressed (the player's ``max_frame_bytes`` and
  room for the small messages beside a frame), and is decompressed to its stated size and one byte more, never
  further (:func:`decompress_chunk`): a lie about the size is one line;
- its records are walked up to a budget of a constant times its *compressed* bytes plus a constant
  (:func:`chunk_messages`): a flood of empty records is one line, and time stays proportional to the file;
- chunks are merged in time order holding at most :attr:`ChunkBounds.open_bytes` of them decompressed at once
  (:meth:`BoundedMcapReader.messages`); past it, messages play in the order of the chunks' stated start times, and
  the lie is said once.

:func:`open_reader` is rosbags' ``Reader`` with these readers for MCAP files, and refuses (one line) the two
rosbag2 compression modes that decompress outside chunks without a bound: ``file`` (the whole file into a
temporary folder) is refused, ``message`` is decompressed here, message by message, within the bound.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import struct
import sys
import threading
from collections.abc import Callable, Collection, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lz4.frame import LZ4FrameDecompressor  # type: ignore[import-untyped]
from rosbags.rosbag2 import Reader
from rosbags.rosbag2.reader import DirectoryReader
from rosbags.rosbag2.storage_mcap import DECOMPRESSORS, McapReader
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Reader

if sys.version_info >= (3, 14):
    from compression import zstd
else:  # rosbags' own dependency below 3.14
    from backports import zstd

from .bag_errors import BagError

__all__ = ["ChunkBounds", "chunk_messages", "decompress_chunk", "open_reader"]

_RECORD = struct.Struct("<BQ")  # opcode, length
_MESSAGE = struct.Struct("<HIQ")  # channel, sequence, log time (publish time follows)
_MESSAGE_HEADER = 22
#: Slack for the records beside one frame in its chunk (rosbag2 fills chunks to about 1 MiB).
_CHUNK_SLACK = 8 << 20
_STEP = 4 << 20  # bytes decompressed a call


@dataclass(frozen=True)
class ChunkBounds:
    """What a bag's chunks may cost.

    ``chunk_bytes``: the most one chunk may state uncompressed.  ``open_bytes``: decompressed chunks held at once
    while merging (one chunk is always let in, whatever its size).  ``records_per_byte`` and ``records_slack``:
    the records a chunk may hold per byte of its compressed data, plus a constant (honest MCAP records cost
    several bytes each even compressed: a log time and sequence that change)."""

    chunk_bytes: int
    open_bytes: int
    records_per_byte: int = 4
    records_slack: int = 4096

    @classmethod
    def for_frames(cls, max_frame_bytes: int) -> ChunkBounds:
        """The bounds of a player that refuses frames past ``max_frame_bytes``."""
        return cls(chunk_bytes=max_frame_bytes + _CHUNK_SLACK, open_bytes=64 << 20)

    def records(self, compressed_bytes: int) -> int:
        return self.records_slack + self.records_per_byte * compressed_bytes


def _inflate(decompressor_factory: Callable[[], Any], data: bytes, limit: int) -> bytearray:
    """Decompress ``data`` (frames one after another) to at most ``limit`` bytes, in steps of ``_STEP`` (so the
    output is never held twice)."""
    out = bytearray()
    pending = data
    while pending and len(out) < limit:
        decompressor = decompressor_factory()
        out += decompressor.decompress(pending, max_length=min(_STEP, limit - len(out)))
        while not decompressor.eof and not decompressor.needs_input and len(out) < limit:
            out += decompressor.decompress(b"", max_length=min(_STEP, limit - len(out)))
        if not decompressor.eof:
            break  # the limit is reached, or the data end within a frame
        pending = decompressor.unused_data
    return out


_DECOMPRESSORS: dict[str, Callable[[], Any]] = {"zstd": zstd.ZstdDecompressor, "lz4": LZ4FrameDecompressor}


def decompress_chunk(data: bytes, compression: str, stated: int, bounds: ChunkBounds) -> bytes | bytearray:
    """A chunk's records: ``data`` decompressed to exactly its ``stated`` size, or a BagError of one line (a size
    past the bound, more or fewer bytes than stated, an unknown compression, data that are not what they say)."""
    if stated > bounds.chunk_bytes:
        raise BagError(f"a chunk states {stated} uncompressed bytes, more than {bounds.chunk_bytes} "
                       "(--max-frame-bytes and 8 MiB for the messages beside a frame)")
    raw: bytes | bytearray = data
    if not compression:
        pass
    elif compression in _DECOMPRESSORS:
        try:
            raw = _inflate(_DECOMPRESSORS[compression], data, stated + 1)
        except (zstd.ZstdError, RuntimeError, ValueError, EOFError) as exc:
            raise BagError(f"a {compression} chunk does not decompress ({type(exc).__name__}: {exc})") from None
    else:
        raise BagError(f"a chunk of unknown compression {compression[:40]!r}")
    if len(raw) != stated:
        more = "more" if len(raw) > stated else f"{len(raw)}"
        raise BagError(f"a {compression or 'plain'} chunk states {stated} uncompressed bytes and holds {more}")
    return raw


def chunk_messages(raw: bytes | bytearray, channels: Collection[int], compressed_bytes: int, bounds: ChunkBounds,
                   start: int = 0, stop: int = 2**64) -> list[tuple[int, int, int, int]]:
    """The messages of ``channels`` in a chunk's records from ``start`` to before ``stop``: (log time, channel,
    data start, data end), in the order of the records.  BagError for a record that overruns the chunk, a message
    record too short for its header, or more records than ``bounds`` allow for ``compressed_bytes``."""
    budget = bounds.records(compressed_bytes)
    found: list[tuple[int, int, int, int]] = []
    position, end, records = 0, len(raw), 0
    while position < end:
        records += 1
        if records > budget:
            raise BagError(f"a chunk of {compressed_bytes} bytes holds more than {budget} records (a flood of empty "
                           "records?)")
        if end - position < _RECORD.size:
            raise BagError(f"a chunk ends inside a record header at byte {position}")
        opcode, length = _RECORD.unpack_from(raw, position)
        body = position + _RECORD.size
        if length > end - body:
            raise BagError(f"a record of {length} bytes at byte {position} overruns its chunk of {end}")
        if opcode == 0x05:
            if length < _MESSAGE_HEADER:
                raise BagError(f"a message record of {length} bytes, less than its {_MESSAGE_HEADER}-byte header")
            channel, _, log_time = _MESSAGE.unpack_from(raw, body)
            if channel in channels and start <= log_time < stop:
                found.append((log_time, channel, body + _MESSAGE_HEADER, body + length))
        position = body + length
    return found


# The decompressors rosbags calls where it scans a file itself (a file without chunk indexes, at open and while
# playing), bounded by the reader that called it.  Others in this process keep rosbags' own (``_ACTIVE`` unset).
_ACTIVE = threading.local()
_ROSBAGS_DECOMPRESSORS = dict(DECOMPRESSORS)


def _bounded_by_caller(compression: str) -> Callable[[bytes, int], bytes]:
    def decompress(data: bytes, stated: int) -> bytes:
        bounds: ChunkBounds | None = getattr(_ACTIVE, "bounds", None)
        if bounds is None:
            return _ROSBAGS_DECOMPRESSORS[compression](data, stated)
        raw = decompress_chunk(data, compression, stated, bounds)
        chunk_messages(raw, (), len(data), bounds)  # the record budget, as the indexed path keeps it
        return bytes(raw)
    return decompress


for _name in ("zstd", "lz4"):
    DECOMPRESSORS[_name] = _bounded_by_caller(_name)


@contextmanager
def _bounded(bounds: ChunkBounds) -> Iterator[None]:
    before = getattr(_ACTIVE, "bounds", None)
    _ACTIVE.bounds = bounds
    try:
        yield
    finally:
        _ACTIVE.bounds = before


class _CappedFile:
    """A file whose ``read(n)`` asks for no more than is left of it.  rosbags reads a record by the length the
    file states; Python's buffered ``read(n)`` allocates ``n`` bytes before reading, so a stated 16 GiB was a
    16 GiB allocation (a MemoryError past that) from a 600-byte file."""

    def __init__(self, file: Any) -> None:
        self._file = file
        self._size = os.fstat(file.fileno()).st_size

    def read(self, size: int = -1) -> bytes:
        left = max(self._size - self._file.tell(), 0)
        return bytes(self._file.read(left if size is None or size < 0 else min(size, left)))

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._file.seek(offset, whence))

    def tell(self) -> int:
        return int(self._file.tell())

    def close(self) -> None:
        self._file.close()


@dataclass
class _OpenChunk:
    """A decompressed chunk's wanted messages, in time order, and the next one to give."""

    raw: memoryview
    messages: list[tuple[int, int, int, int]]
    next: int = 0


class BoundedMcapReader(McapReader):
    """rosbags' MCAP reader with its chunks read within ``bounds`` (set on the class by :func:`open_reader`)."""

    bounds = ChunkBounds.for_frames(1 << 28)
    #: Where a lie that costs order, not the replay, is said (one line).
    say: Callable[[str], None] = staticmethod(lambda line: None)

    def open(self) -> None:
        """rosbags' open, on a file whose reads are capped at what is left of it (:class:`_CappedFile`)."""
        self._said_overlap = False
        try:
            self.bio = _CappedFile(self.path.open("rb"))  # type: ignore[assignment]
        except OSError as exc:
            raise BagError(f"cannot open {self.path}: {exc.strerror}") from None
        try:
            with _bounded(self.bounds):  # a file without a summary is scanned, its chunks decompressed, at open
                self._open()
        except BaseException:
            with contextlib.suppress(Exception):
                self.close()
            raise

    def messages(self, connections: Collection[Any], start: int | None = None,
                 stop: int | None = None) -> Generator[tuple[Any, int, bytes], None, None]:
        if not self.chunks:
            yield from self._scanned(connections, start, stop)
            return
        yield from self._merged(connections, 0 if start is None else start, 2**64 if stop is None else stop)

    def _scanned(self, connections: Collection[Any], start: int | None,
                 stop: int | None) -> Generator[tuple[Any, int, bytes], None, None]:
        messages = super().messages(connections, start, stop)
        while True:
            with _bounded(self.bounds):
                item = next(messages, None)
            if item is None:
                return
            yield item

    def _merged(self, connections: Collection[Any], start: int,
                stop: int) -> Generator[tuple[Any, int, bytes], None, None]:
        """The chunks' messages in time order: a chunk is opened when its stated start is due, while the chunks
        open hold at most ``open_bytes``; past that, the earliest message open is given first (said once)."""
        by_id = {c.id: c for c in connections}
        chunks = sorted((c for c in self.chunks
                         if c.message_end_time >= start and c.message_start_time < stop
                         and any(c.channel_count.get(i, 0) for i in by_id)),
                        key=lambda c: (c.message_start_time, c.chunk_start_offset))
        heap: list[tuple[int, int, int]] = []  # (log time, order opened, slot)
        open_chunks: dict[int, _OpenChunk] = {}
        held, following, opened = 0, 0, 0
        while heap or following < len(chunks):
            while following < len(chunks) and (not heap or chunks[following].message_start_time <= heap[0][0]):
                chunk = chunks[following]
                if heap and held + chunk.uncompressed_size > self.bounds.open_bytes:
                    if not self._said_overlap:
                        self._said_overlap = True
                        self.say(f"{Path(str(self.path)).name}: chunks stating overlapping times would hold "
                                       f"more than {self.bounds.open_bytes >> 20} MiB at once (stated start times "
                                       "wrong?): from here some messages may play out of time order")
                    break
                following += 1
                found = self._open_chunk(chunk, by_id, start, stop)
                if found is not None and found.messages:
                    opened += 1
                    open_chunks[opened] = found
                    held += len(found.raw)
                    heapq.heappush(heap, (found.messages[0][0], opened, opened))
            if not heap:
                if following < len(chunks):
                    continue
                return
            _, order, slot = heapq.heappop(heap)
            chunk_open = open_chunks[slot]
            log_time, channel, begin, end = chunk_open.messages[chunk_open.next]
            chunk_open.next += 1
            if chunk_open.next < len(chunk_open.messages):
                heapq.heappush(heap, (chunk_open.messages[chunk_open.next][0], order, slot))
            else:
                del open_chunks[slot]
                held -= len(chunk_open.raw)
            yield by_id[channel], log_time, bytes(chunk_open.raw[begin:end])

    def _open_chunk(self, chunk: Any, by_id: dict[int, Any], start: int, stop: int) -> _OpenChunk | None:
        bio = self.bio
        assert bio is not None
        where = f"the chunk at byte {chunk.chunk_start_offset}"
        if chunk.compressed_size > chunk.chunk_length:
            raise BagError(f"{where} states {chunk.compressed_size} compressed bytes in a record of "
                           f"{chunk.chunk_length}")
        bio.seek(chunk.chunk_start_offset + 9 + 40 + len(chunk.compression))
        data = bio.read(chunk.compressed_size)
        if len(data) != chunk.compressed_size:
            raise BagError(f"{where} is cut short: {len(data)} of {chunk.compressed_size} bytes")
        try:
            raw = decompress_chunk(data, chunk.compression, chunk.uncompressed_size, self.bounds)
            messages = chunk_messages(raw, by_id.keys(), len(data), self.bounds, start, stop)
        except BagError as exc:
            raise BagError(f"{where}: {exc}") from None
        messages.sort()
        return _OpenChunk(memoryview(raw), messages)


class _BoundedDirectoryReader(DirectoryReader):
    """A bag directory whose MCAP files are read by :class:`BoundedMcapReader`; per-message compression is
    decompressed here within the bound (rosbags' would not be)."""

    bounds = BoundedMcapReader.bounds

    def open(self) -> None:
        super().open()
        self._per_message = self.metadata.compression_mode == "message"
        if self._per_message:  # rosbags would decompress each message unbounded: it hands them over as stored
            self.metadata = self.metadata._replace(compression_mode=None)

    def messages(self, connections: Collection[Any], start: int | None = None,
                 stop: int | None = None) -> Generator[tuple[Any, int, bytes], None, None]:
        for connection, timestamp, data in super().messages(connections, start, stop):
            if self._per_message:
                data = bytes(decompress_chunk(data, "zstd", _zstd_content_size(data), self.bounds))
            yield connection, timestamp, data


def _zstd_content_size(data: bytes) -> int:
    """The size a zstd frame states for its content (rosbag2 compresses each message as one frame that states it)."""
    try:
        size = zstd.get_frame_info(data).decompressed_size
    except (zstd.ZstdError, ValueError, TypeError) as exc:
        raise BagError(f"a compressed message is not zstd ({exc})") from None
    if size is None:
        raise BagError("a compressed message does not state its size")
    return int(size)


def open_reader(path: Path, bounds: ChunkBounds, say: Callable[[str], None] = lambda line: None) -> Reader:
    """rosbags' ``Reader`` of the bag at ``path`` (a directory, or one .mcap / .db3 file), not yet opened, whose
    MCAP chunks are read within ``bounds``; ``say`` gets the one line of a lie that costs only the order.
    FileNotFoundError where nothing is there; BagError for a bag compressed per file."""
    _refuse_file_compression(path)
    mcap = type("BoundedMcap", (BoundedMcapReader,), {"bounds": bounds, "say": staticmethod(say)})
    directory = type("BoundedDirectory", (_BoundedDirectoryReader,),
                     {"bounds": bounds, "STORAGE_PLUGINS": {"mcap": mcap, "sqlite3": Sqlite3Reader}})
    reader = type("BoundedReader", (Reader,),
                  {"STORAGE_PLUGINS": {"dir": directory, ".mcap": mcap, ".db3": Sqlite3Reader}})
    return reader(path)


def _refuse_file_compression(path: Path) -> None:
    """rosbags inflates a file-compressed bag's files whole into a temporary folder: no bound on the disk."""
    metadata = path / "metadata.yaml"
    if not metadata.is_file():
        return
    with metadata.open("rb") as file:
        head = file.read(1 << 20)
    for line in head.decode("utf-8", "replace").splitlines():
        key, _, value = line.strip().partition(":")
        if key == "compression_mode" and value.strip().strip("'\"").lower() == "file":
            raise BagError(f"{path}: compressed per file (compression_mode: file), which bag_play does not inflate; "
                           "decompress its files first (zstd -d) and set compression_mode to ''")
