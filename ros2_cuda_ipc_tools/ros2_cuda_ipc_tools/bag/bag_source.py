"""``BagSource``: a rosbag2 bag opened with rosbags, its topics as its files have them, messages in bag-time order.

A bag is hostile input.  Anything wrong with it (missing, not a bag, corrupt YAML, truncated, an unknown
storage or compression) is a :class:`BagError` of one line, at open or while reading, never a traceback.
``metadata.yaml`` is a second opinion: the topics, types and counts of the storage files are what is
played, and every way the metadata disagrees with them is one line of :attr:`BagSource.disagreements`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ros2_cuda_ipc_core import DEFAULT_MAX_FRAME_BYTES

from .bag_errors import BagError
from .bounded_mcap import ChunkBounds, open_reader

__all__ = ["BagSource", "BagTopicInfo", "one_line"]


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and its message with every run of whitespace made one space."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:400]


@dataclass(frozen=True)
class BagTopicInfo:
    """A topic as the storage files have it: its type, its definition's RIHS01 hash ('' if not stored), count."""

    name: str
    msgtype: str
    digest: str
    count: int


class BagSource:
    """An open bag; ``topics`` (empty: all) picks topics, every name must be in the bag.  Its MCAP chunks are read
    within the bounds of a player that refuses frames past ``max_frame_bytes`` (:mod:`.bounded_mcap`); ``say``
    gets the one line of a lie that costs only the order of the messages."""

    def __init__(self, path: str | Path, topics: Sequence[str] = (), *,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, say: Callable[[str], None] = lambda line: None) -> None:
        self.path = Path(path)
        _refuse_a_folder_that_is_not_a_bag(self.path)
        try:
            self._reader = open_reader(self.path, ChunkBounds.for_frames(max_frame_bytes), say)
            self._reader.open()
        except FileNotFoundError:
            raise BagError(f"{self.path}: no such bag") from None
        except BagError as exc:
            raise BagError(f"{self.path}: {exc}") from None
        except Exception as exc:  # rosbags' ReaderError, YAML errors, and what a corrupt file makes its parsers raise
            raise BagError(f"{self.path}: not a readable rosbag2 bag ({one_line(exc)})") from None
        storages = getattr(self._reader.storage, "storages", None)  # one reader per file of a bag directory
        stored = [c for storage in (storages if storages is not None else [self._reader.storage])
                  for c in storage.connections]
        self.disagreements = _disagreements(self._reader.connections, stored) if storages is not None else []
        self.topics = _topics(stored)
        for c in self._reader.connections if storages is not None else []:  # a file may leave the hash to metadata
            known = self.topics.get(c.topic)
            if known is not None and not known.digest and known.msgtype == c.msgtype and c.digest:
                self.topics[c.topic] = BagTopicInfo(known.name, known.msgtype, str(c.digest), known.count)
        unknown = [t for t in topics if t not in self.topics]
        if unknown:
            self.close()
            raise BagError(f"{self.path} has no topic {', '.join(unknown)}; its topics: "
                           f"{', '.join(sorted(self.topics)) or 'none'}")
        wanted = set(topics) or set(self.topics)
        # One connection per (topic, type, serialization, hash): the reader finds each file's own by these.
        self.connections: list[Any] = []
        for c in stored:
            if c.topic in wanted and not any((k.topic, k.msgtype, k.ext, k.digest) == (c.topic, c.msgtype, c.ext,
                                                                                   c.digest) for k in self.connections):
                self.connections.append(c)

    @property
    def duration(self) -> int:
        """The bag's span in ns, as its metadata states it (for the progress line only)."""
        return max(int(self._reader.duration), 0)

    def messages(self, start: int | None = None) -> Iterator[tuple[str, str, int, bytes]]:
        """(topic, type, bag time in ns, CDR bytes) from bag time ``start`` on; BagError if the bag breaks midway."""
        if not self.connections:
            return
        try:
            for connection, timestamp, data in self._reader.messages(self.connections, start=start):
                yield connection.topic, connection.msgtype, int(timestamp), data
        except Exception as exc:
            raise BagError(f"{self.path}: the bag cannot be read past this point ({one_line(exc)})") from None

    def first(self, topic: str) -> bytes | None:
        """The first message of ``topic`` (to size a pool before playing), or None if it has none."""
        chosen = [c for c in self.connections if c.topic == topic]
        try:
            for _, _, data in self._reader.messages(chosen):
                return data
        except Exception as exc:
            raise BagError(f"{self.path}: {topic} cannot be read ({one_line(exc)})") from None
        return None

    def close(self) -> None:
        self._reader.close()


def _refuse_a_folder_that_is_not_a_bag(path: Path) -> None:
    """A folder without ``metadata.yaml`` is not a bag: say what it lacks (and which storage files it has)."""
    if not path.is_dir() or (path / "metadata.yaml").exists():
        return
    try:
        files = sorted(p.name for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
    except OSError as exc:
        raise BagError(f"{path}: not a bag ({exc.strerror})") from None
    if files:
        raise BagError(f"{path}: not a bag (no metadata.yaml); play one of its files: {', '.join(files[:3])}"
                       f"{' ...' if len(files) > 3 else ''}")
    raise BagError(f"{path}: not a bag (no metadata.yaml, no .mcap or .db3 file)")


def _topics(stored: Sequence[Any]) -> dict[str, BagTopicInfo]:
    """Topic name to its type in the files (the first file's, if files disagree), counts summed over files."""
    topics: dict[str, BagTopicInfo] = {}
    for c in stored:
        seen = topics.get(c.topic)
        count = int(c.msgcount) + (seen.count if seen is not None else 0)
        topics[c.topic] = BagTopicInfo(c.topic, seen.msgtype if seen else c.msgtype, seen.digest if seen else c.digest,
                                       count)
    return topics


def _disagreements(stated: Sequence[Any], stored: Sequence[Any]) -> list[str]:
    """What metadata.yaml says that the files do not: one line each."""
    files = _topics(stored)
    lines = []
    for c in stated:
        found = files.get(c.topic)
        if found is None:
            lines.append(f"metadata.yaml lists {c.topic} ({c.msgtype}, {c.msgcount} messages), which no file of "
                         "the bag has: nothing of it is played")
        elif found.msgtype != c.msgtype:
            lines.append(f"metadata.yaml says {c.topic} is {c.msgtype}, the files say {found.msgtype}: played as "
                         "the files say")
        elif int(c.msgcount) != found.count:
            lines.append(f"metadata.yaml counts {c.msgcount} messages of {c.topic}, the files {found.count}: the "
                         "files' are played")
    listed = {c.topic for c in stated}
    lines += [f"{t.name} ({t.msgtype}, {t.count} messages) is in the files but not in metadata.yaml: played"
              for t in files.values() if t.name not in listed]
    return lines
