"""``BagSource``: a rosbag2 bag opened with rosbags, its connections chosen, its messages in bag-time order.

Anything wrong with the bag (missing, not a bag, corrupt, truncated, an unknown storage or compression) is
a :class:`BagError` of one line, at open or while reading, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rosbags.rosbag2 import Reader

from .bag_errors import BagError

__all__ = ["BagSource"]


class BagSource:
    """An open bag; ``topics`` (empty: all) picks connections, every name must be in the bag."""

    def __init__(self, path: str | Path, topics: Sequence[str] = ()) -> None:
        self.path = Path(path)
        try:
            self._reader = Reader(self.path)
            self._reader.open()
        except FileNotFoundError:
            raise BagError(f"{self.path}: no such bag") from None
        except Exception as exc:  # rosbags' ReaderError, and what a corrupt file makes its parsers raise
            raise BagError(f"{self.path}: not a readable rosbag2 bag ({type(exc).__name__}: {exc})") from None
        names = {c.topic for c in self._reader.connections}
        unknown = [t for t in topics if t not in names]
        if unknown:
            self.close()
            raise BagError(f"{self.path} has no topic {', '.join(unknown)}; its topics: {', '.join(sorted(names))}")
        self.connections = [c for c in self._reader.connections if not topics or c.topic in topics]

    @property
    def start_time(self) -> int:
        return int(self._reader.start_time)

    @property
    def duration(self) -> int:
        return int(self._reader.duration)

    def messages(self, start: int | None = None) -> Iterator[tuple[Any, int, bytes]]:
        """(connection, bag time in ns, CDR bytes) from bag time ``start`` on; BagError if the bag breaks midway."""
        try:
            yield from self._reader.messages(self.connections, start=start)
        except Exception as exc:
            raise BagError(f"{self.path}: the bag cannot be read past this point ({type(exc).__name__}: {exc})") \
                from None

    def first(self, connection: Any) -> bytes | None:
        """The first message of ``connection`` (to size a pool before playing), or None if it has none."""
        for _, _, data in self._messages_of(connection):
            return data
        return None

    def _messages_of(self, connection: Any) -> Iterator[tuple[Any, int, bytes]]:
        try:
            yield from self._reader.messages([connection])
        except Exception as exc:
            raise BagError(f"{self.path}: {connection.topic} cannot be read ({type(exc).__name__}: {exc})") from None

    def close(self) -> None:
        self._reader.close()
