"""``SplitBagWriter``: one rosbag2 bag directory, split into files like ``ros2 bag record``, MCAP or SQLite3.

A message arrives as ``parts``, buffers whose concatenation is its CDR (a prefix, a frame's memory, a
suffix).  MCAP files are written by :class:`McapFile`, which takes the parts as they are (``os.writev``);
SQLite3 files by rosbags' writer, which binds one buffer per message (the recorder hands it the whole
message in one ring buffer, so nothing is joined).  Splitting (``--max-bag-size``, ``--max-duration``)
starts ``<bag>_<n>.mcap`` (or ``.db3``) files; at the end one ``metadata.yaml`` lists every file with its
counts, as rosbag2's own splitting does, so ``ros2 bag info``/``play`` and rosbags see one bag.

A full disk ends the recording, not the bag: each file is closed with what it holds whole (MCAP: its whole
chunks, SQLite3: its committed transactions, one a second), the counts in ``metadata.yaml`` are the files'
own, and ``metadata.yaml`` is written into room reserved for it when the bag was made.  :meth:`SplitBagWriter.
topic_counts` says what the bag holds, so the recorder can say what was lost.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from rosbags.rosbag2 import StoragePlugin, Writer

from .bag_errors import BagError
from .bag_metadata import BagTopic, FileCounts, bag_metadata, dump_metadata
from .mcap_file import McapContents, McapFile

__all__ = ["STORAGES", "SplitBagWriter"]

#: --storage names to the suffix of their files.
STORAGES: dict[str, str] = {"mcap": ".mcap", "sqlite3": ".db3"}
#: Bytes set aside for metadata.yaml when a bag is made, so it is written even on a full disk.
METADATA_RESERVE = 256 * 1024
#: Seconds and bytes between SQLite3 commits: what a disk error can cost.
_COMMIT_SECONDS = 1.0
_COMMIT_BYTES = 64 << 20

#: What a file holds once closed: messages per topic, first and last bag time.
Held = tuple[dict[str, int], int, int]


def _library() -> str:
    from ros2_cuda_ipc_core import version_of

    return f"ros2_cuda_ipc_tools {version_of('ros2_cuda_ipc_tools')}"


class _StorageFile(Protocol):
    """One file of the bag, open for writing."""

    @property
    def bytes_written(self) -> int: ...

    def add_topic(self, topic: BagTopic) -> None: ...

    def write(self, topic: str, timestamp: int, parts: Sequence[Any], size: int) -> None: ...

    def close(self, metadata: Callable[[Held], str]) -> Held:
        """Close with the bag metadata text of what the file holds (``metadata``); what it holds."""
        ...

    def abort(self) -> None: ...


class _McapStorage:
    """A ``.mcap`` file: a schema per type, a channel per topic, as rosbag2's MCAP plugin makes them."""

    def __init__(self, path: Path) -> None:
        self.file = McapFile(path, _library())
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self._topics: dict[int, str] = {}

    @property
    def bytes_written(self) -> int:
        return self.file.size

    def add_topic(self, topic: BagTopic) -> None:
        if topic.msgtype not in self._schemas:
            self._schemas[topic.msgtype] = self.file.add_schema(topic.msgtype, "ros2msg", topic.msgdef)
        self._channels[topic.name] = self.file.add_channel(
            topic.name, self._schemas[topic.msgtype], "cdr",
            {"offered_qos_profiles": "[]", "topic_type_hash": topic.rihs01})
        self._topics[self._channels[topic.name]] = topic.name

    def write(self, topic: str, timestamp: int, parts: Sequence[Any], size: int) -> None:
        self.file.write(self._channels[topic], timestamp, parts, size)

    def close(self, metadata: Callable[[Held], str]) -> Held:
        held = self.file.close(lambda contents: metadata(self._held(contents)))
        return self._held(held)

    def _held(self, contents: McapContents) -> Held:
        return {self._topics[c]: n for c, n in contents.counts.items() if n}, contents.start, contents.end

    def abort(self) -> None:
        self.file.abort()


class _Sqlite3Storage:
    """A ``.db3`` file through rosbags' writer (in a hidden folder until it is closed), committed once a second
    (or 64 MiB) and after each topic added: a disk error costs the messages since the last commit.  The commits
    and the counts of the file's own metadata row reach into rosbags' writer (``storage.conn``, ``counts``:
    attributes of the pinned rosbags)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = Writer(path.parent / ".parts" / path.stem, version=Writer.VERSION_LATEST,
                              storage_plugin=StoragePlugin.SQLITE3)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self.bytes_written = 0
        self._committed: dict[str, int] = {}  # messages per topic in committed transactions
        self._pending: dict[str, int] = {}
        self._times = (2**63 - 1, 0)  # committed first and last bag time
        self._pending_times = (2**63 - 1, 0)
        self._pending_bytes = 0
        self._last_commit = time.monotonic()
        self._failed = False

    def add_topic(self, topic: BagTopic) -> None:
        self._connections[topic.name] = self._writer.add_connection(topic.name, topic.msgtype, msgdef=topic.msgdef,
                                                                    rihs01=topic.rihs01)
        self._commit()  # the tables and the topic are in the file before any message

    def write(self, topic: str, timestamp: int, parts: Sequence[Any], size: int) -> None:
        data = parts[0] if len(parts) == 1 else b"".join(parts)  # one buffer, as the recorder gives its frames
        try:
            self._writer.write(self._connections[topic], timestamp, data)
            self.bytes_written += size
            self._pending[topic] = self._pending.get(topic, 0) + 1
            first, last = self._pending_times
            self._pending_times = (min(first, timestamp), max(last, timestamp))
            self._pending_bytes += size
            if time.monotonic() - self._last_commit >= _COMMIT_SECONDS or self._pending_bytes >= _COMMIT_BYTES:
                self._commit()
        except sqlite3.Error:
            self._roll_back()
            raise

    def _commit(self) -> None:
        self._writer.storage.conn.commit()  # type: ignore[union-attr]
        self._last_commit = time.monotonic()
        for topic, n in self._pending.items():
            self._committed[topic] = self._committed.get(topic, 0) + n
        self._times = (min(self._times[0], self._pending_times[0]), max(self._times[1], self._pending_times[1]))
        self._pending, self._pending_times, self._pending_bytes = {}, (2**63 - 1, 0), 0

    def _roll_back(self) -> None:
        """A disk error: SQLite may have rolled the transaction back already; what it held is lost either way."""
        self._failed = True
        self._pending, self._pending_times, self._pending_bytes = {}, (2**63 - 1, 0), 0
        with contextlib.suppress(sqlite3.Error):
            self._writer.storage.conn.rollback()  # type: ignore[union-attr]

    def close(self, metadata: Callable[[Held], str]) -> Held:
        if not self._failed:
            try:
                self._commit()
            except sqlite3.Error:
                self._roll_back()
        held = self._held()
        counts = self._writer.counts
        for topic, connection in self._connections.items():
            counts[connection.id] = self._committed.get(topic, 0)  # the file's own metadata row counts these
        try:
            self._writer.close()
        except (sqlite3.Error, OSError):  # its metadata row, or rosbags' own metadata.yaml: the messages stay
            self._writer.abort()
        folder = self._writer.path
        (folder / self.path.name).replace(self.path)
        shutil.rmtree(folder, ignore_errors=True)
        return held

    def _held(self) -> Held:
        first, last = self._times
        return dict(self._committed), (first if self._committed else 0), last

    def abort(self) -> None:
        self._writer.abort()


_OPENERS: dict[str, Callable[[Path], _StorageFile]] = {"mcap": _McapStorage, "sqlite3": _Sqlite3Storage}


class SplitBagWriter:
    """Write messages into ``path`` (a new directory); a new file starts past ``max_bytes`` or ``max_seconds``
    (0: never).  :meth:`close` writes the metadata; a bag closed after any message is complete and valid."""

    def __init__(self, path: str | Path, storage: str = "mcap", max_bytes: int = 0, max_seconds: float = 0.0) -> None:
        if storage not in STORAGES:
            raise BagError(f"unknown storage {storage!r}: one of {', '.join(STORAGES)}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"{self.path} exists already; bag_record writes a new bag")
        self.storage, self.suffix = storage, STORAGES[storage]
        self.max_bytes, self.max_ns = int(max_bytes), int(max_seconds * 1e9)
        self.bytes_written = 0
        self._topics: dict[str, BagTopic] = {}
        self._files: list[FileCounts] = []
        self._file: _StorageFile | None = None
        self._file_start = 0
        try:
            self.path.mkdir(parents=True)
            (self.path / "metadata.yaml.tmp").write_bytes(b" " * METADATA_RESERVE)  # room for it on a full disk
        except OSError as exc:
            shutil.rmtree(self.path, ignore_errors=True)
            raise BagError(f"cannot create the bag {self.path}: {exc.strerror}") from None

    @property
    def contiguous(self) -> bool:
        """Whether a message must be one buffer (SQLite3 binds one) rather than parts side by side (MCAP)."""
        return self.storage == "sqlite3"

    @property
    def files(self) -> int:
        return len(self._files)

    def add_topic(self, topic: str, msgtype: str, msgdef: str, rihs01: str) -> None:
        """Record ``topic`` from now on (its type's definition and RIHS01 hash go into every file)."""
        self._topics[topic] = BagTopic(topic, msgtype, msgdef, rihs01)
        if self._file is not None:
            self._file.add_topic(self._topics[topic])

    def write(self, topic: str, timestamp: int, data: Any | Sequence[Any], size: int | None = None) -> None:
        """Append one message received at ``timestamp`` (ns since the epoch): ``data``, one buffer, or a list of
        buffers whose concatenation (``size`` bytes) is its CDR."""
        parts: Sequence[Any] = data if isinstance(data, list) else [data]
        size = sum(memoryview(p).nbytes for p in parts) if size is None else size
        if self._file is not None and self._file_full(timestamp):
            self._close_file()
        if self._file is None:
            self._open_file(timestamp)
        assert self._file is not None
        before = self._file.bytes_written
        self._file.write(topic, timestamp, parts, size)
        self._files[-1].add(topic, timestamp)
        self.bytes_written += self._file.bytes_written - before

    def _file_full(self, timestamp: int) -> bool:
        assert self._file is not None
        return ((self.max_bytes > 0 and self._file.bytes_written >= self.max_bytes)
                or (self.max_ns > 0 and timestamp - self._file_start >= self.max_ns))

    def _open_file(self, timestamp: int) -> None:
        name = f"{self.path.name}_{len(self._files)}{self.suffix}"
        file = self._file = _OPENERS[self.storage](self.path / name)
        self._files.append(FileCounts(name))
        for topic in self._topics.values():
            file.add_topic(topic)
        self._file_start = timestamp

    def topic_counts(self) -> dict[str, int]:
        """Messages per topic in the files closed so far (all of them, once the bag is closed)."""
        counts: dict[str, int] = {}
        for file in self._files:
            for topic, n in file.counts.items():
                counts[topic] = counts.get(topic, 0) + n
        return counts

    def _close_file(self) -> None:
        """Close the file in progress; its counts become what it holds (less than written where the disk failed)."""
        file, self._file = self._file, None
        assert file is not None
        entry = self._files[-1]

        def metadata(held: Held) -> str:
            self._hold(entry, held)
            return dump_metadata(bag_metadata(self.storage, [entry], list(self._topics.values()))
                                 ["rosbag2_bagfile_information"])
        self._hold(entry, file.close(metadata))

    @staticmethod
    def _hold(entry: FileCounts, held: Held) -> None:
        entry.counts, entry.start, entry.end = dict(held[0]), held[1], held[2]
        if not entry.message_count:
            entry.start, entry.end = 2**63 - 1, 0

    def close(self) -> None:
        """Close the file in progress and write ``metadata.yaml`` for every file.  A recording that got no
        message is still a bag (one empty file and its metadata), as ``ros2 bag record`` leaves one."""
        try:
            if self._file is None and not self._files:
                self._open_file(time.time_ns())
            if self._file is not None:
                self._close_file()
        finally:  # the files closed, or the one that failed cut back: the metadata says what they hold
            shutil.rmtree(self.path / ".parts", ignore_errors=True)
            self._write_metadata()

    def _write_metadata(self) -> None:
        """``metadata.yaml``, written over the room reserved for it (no new block needed on a full disk)."""
        text = dump_metadata(bag_metadata(self.storage, self._files, list(self._topics.values()))).encode()
        temporary = self.path / "metadata.yaml.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(text)
            while view:
                view = view[os.write(fd, view):]
            os.ftruncate(fd, len(text))
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(self.path / "metadata.yaml")

    def abort(self) -> None:
        """Give up the file in progress without its index (what an error mid-write leaves)."""
        if self._file is not None:
            self._file.abort()
            self._file = None
