"""``SplitBagWriter``: one rosbag2 bag directory written with rosbags, split into files like ``ros2 bag record``.

rosbags writes one storage file per bag.  Splitting (``--max-bag-size``, ``--max-duration``) writes each
part as a bag of its own in a hidden folder, moves its file up as ``<bag>_<n>.mcap`` (or ``.db3``) when
the part is closed, and at the end writes one ``metadata.yaml`` that lists every file with its counts,
as rosbag2's own splitting does, so ``ros2 bag info``/``play`` and rosbags see one bag.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosbags.rosbag2 import StoragePlugin, Writer
from ruamel.yaml import YAML

from .bag_errors import BagError

__all__ = ["STORAGES", "SplitBagWriter"]

#: --storage names to rosbags plugins and the suffix of their files.
STORAGES: dict[str, tuple[StoragePlugin, str]] = {"mcap": (StoragePlugin.MCAP, ".mcap"),
                                                   "sqlite3": (StoragePlugin.SQLITE3, ".db3")}


@dataclass(frozen=True)
class _Topic:
    msgtype: str
    msgdef: str
    rihs01: str


class SplitBagWriter:
    """Write messages into ``path`` (a new directory); a new file starts past ``max_bytes`` or ``max_seconds``
    (0: never).  :meth:`close` writes the metadata; a bag closed after any message is complete and valid."""

    def __init__(self, path: str | Path, storage: str = "mcap", max_bytes: int = 0, max_seconds: float = 0.0) -> None:
        if storage not in STORAGES:
            raise BagError(f"unknown storage {storage!r}: one of {', '.join(STORAGES)}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"{self.path} exists already; bag_record writes a new bag")
        self.plugin, self.suffix = STORAGES[storage]
        self.max_bytes, self.max_ns = int(max_bytes), int(max_seconds * 1e9)
        self.bytes_written = 0
        self._topics: dict[str, _Topic] = {}
        self._parts: list[dict[str, Any]] = []
        self._writer: Writer | None = None
        self._connections: dict[str, Any] = {}
        self._part_bytes = 0
        self._part_start: int | None = None
        try:
            (self.path / ".parts").mkdir(parents=True)
        except OSError as exc:
            raise BagError(f"cannot create the bag {self.path}: {exc.strerror}") from None

    @property
    def files(self) -> int:
        return len(self._parts) + (self._writer is not None)

    def add_topic(self, topic: str, msgtype: str, msgdef: str, rihs01: str) -> None:
        """Record ``topic`` from now on (its type's definition and RIHS01 hash go into every file)."""
        self._topics[topic] = _Topic(msgtype, msgdef, rihs01)
        if self._writer is not None:
            self._connect(topic)

    def write(self, topic: str, timestamp: int, data: bytes | memoryview) -> None:
        """Append one serialized message received at ``timestamp`` (ns since the epoch)."""
        if self._writer is not None and self._part_full(timestamp):
            self._close_part()
        if self._writer is None:
            self._open_part(timestamp)
        assert self._writer is not None
        self._writer.write(self._connections[topic], timestamp, data)
        self._part_bytes += len(data)
        self.bytes_written += len(data)

    def _part_full(self, timestamp: int) -> bool:
        assert self._part_start is not None
        return ((self.max_bytes > 0 and self._part_bytes >= self.max_bytes)
                or (self.max_ns > 0 and timestamp - self._part_start >= self.max_ns))

    def _part_name(self) -> str:
        return f"{self.path.name}_{len(self._parts)}"

    def _open_part(self, timestamp: int) -> None:
        self._writer = Writer(self.path / ".parts" / self._part_name(), version=Writer.VERSION_LATEST,
                              storage_plugin=self.plugin)
        self._writer.open()
        self._connections = {}
        for topic in self._topics:
            self._connect(topic)
        self._part_bytes, self._part_start = 0, timestamp

    def _connect(self, topic: str) -> None:
        assert self._writer is not None
        t = self._topics[topic]
        self._connections[topic] = self._writer.add_connection(topic, t.msgtype, msgdef=t.msgdef, rihs01=t.rihs01)

    def _close_part(self) -> None:
        writer, self._writer = self._writer, None
        assert writer is not None
        writer.close()
        folder = writer.path
        metadata = YAML(typ="safe").load((folder / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        name = metadata["relative_file_paths"][0]
        (folder / name).replace(self.path / name)
        self._parts.append(metadata)
        shutil.rmtree(folder)

    def close(self) -> None:
        """Close the file in progress and write ``metadata.yaml`` for every file.  A recording that got no
        message is still a bag (one empty file and its metadata), as ``ros2 bag record`` leaves one."""
        if self._writer is None and not self._parts:
            self._open_part(time.time_ns())
        if self._writer is not None:
            self._close_part()
        shutil.rmtree(self.path / ".parts", ignore_errors=True)
        if self._parts:
            self._write_metadata()

    def abort(self) -> None:
        """Give up the file in progress without its index (what an error mid-write leaves)."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

    def _write_metadata(self) -> None:
        first = self._parts[0]
        start = min(p["starting_time"]["nanoseconds_since_epoch"] for p in self._parts)
        end = max(p["starting_time"]["nanoseconds_since_epoch"] + p["duration"]["nanoseconds"] for p in self._parts)
        counts: dict[str, int] = {}
        topics: dict[str, Any] = {}
        for part in self._parts:
            for entry in part["topics_with_message_count"]:
                name = entry["topic_metadata"]["name"]
                topics.setdefault(name, entry["topic_metadata"])
                counts[name] = counts.get(name, 0) + entry["message_count"]
        merged = dict(first)
        merged.update({
            "relative_file_paths": [name for p in self._parts for name in p["relative_file_paths"]],
            "duration": {"nanoseconds": end - start},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": sum(p["message_count"] for p in self._parts),
            "topics_with_message_count": [{"topic_metadata": topics[n], "message_count": counts[n]} for n in topics],
            "files": [f for p in self._parts for f in p["files"]],
        })
        yaml = YAML(typ="safe")
        yaml.default_flow_style = False
        temporary = self.path / "metadata.yaml.tmp"
        with temporary.open("w") as out:
            yaml.dump({"rosbag2_bagfile_information": merged}, out)
        temporary.replace(self.path / "metadata.yaml")

