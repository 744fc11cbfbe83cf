"""``metadata.yaml`` as rosbag2 writes it (version 9): the bag's files, its topics and their message counts.

Both storages share it: the MCAP files also carry it (their ``rosbag2`` metadata record), and the bag's
``metadata.yaml`` lists every file of a split recording.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML

__all__ = ["BagTopic", "FileCounts", "bag_metadata", "dump_metadata"]

VERSION = 9


@dataclass(frozen=True)
class BagTopic:
    """A recorded topic: its type, the type's full definition (``ros2msg``) and its RIHS01 hash."""

    name: str
    msgtype: str
    msgdef: str
    rihs01: str


@dataclass
class FileCounts:
    """One storage file: its name, the bag times of its first and last message, its messages per topic."""

    path: str
    start: int = 2**63 - 1
    end: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, topic: str, timestamp: int) -> None:
        self.counts[topic] = self.counts.get(topic, 0) + 1
        self.start, self.end = min(self.start, timestamp), max(self.end, timestamp)

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())

    def times(self) -> tuple[int, int]:
        """(start, duration) in ns; (0, 0) for a file without messages."""
        return (self.start, self.end - self.start) if self.message_count else (0, 0)


def bag_metadata(storage: str, files: list[FileCounts], topics: list[BagTopic]) -> dict[str, Any]:
    """The ``rosbag2_bagfile_information`` of ``files`` (in order) and ``topics``."""
    spans = [f.times() for f in files if f.message_count]
    start = min((s for s, _ in spans), default=0)
    end = max((s + d for s, d in spans), default=0)

    def entry(topic: BagTopic) -> dict[str, Any]:
        return {"topic_metadata": {"name": topic.name, "type": topic.msgtype, "serialization_format": "cdr",
                                   "offered_qos_profiles": [], "type_description_hash": topic.rihs01},
                "message_count": sum(f.counts.get(topic.name, 0) for f in files)}

    return {"rosbag2_bagfile_information": {
        "version": VERSION,
        "storage_identifier": storage,
        "duration": {"nanoseconds": end - start},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": sum(f.message_count for f in files),
        "topics_with_message_count": [entry(t) for t in topics],
        "compression_format": "",
        "compression_mode": "",
        "relative_file_paths": [f.path for f in files],
        "files": [{"path": f.path, "starting_time": {"nanoseconds_since_epoch": f.times()[0]},
                   "duration": {"nanoseconds": f.times()[1]}, "message_count": f.message_count} for f in files],
        "custom_data": None,
        "ros_distro": os.environ.get("ROS_DISTRO", ""),
    }}


def dump_metadata(metadata: dict[str, Any]) -> str:
    """The YAML text of ``metadata``, block style as rosbag2 writes it."""
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    text = io.StringIO()
    yaml.dump(metadata, text)
    return text.getvalue()
