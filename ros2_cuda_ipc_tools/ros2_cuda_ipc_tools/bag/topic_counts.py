"""``TopicCounts`` and ``RecordStatus``: what the recorder counts per topic, its live status line and final table."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

__all__ = ["DROP_CAUSES", "RecordStatus", "TopicCounts"]

#: Why a frame was dropped, as the final table says it: a "dropped 1" alone left a GPU suite's 29 of 30 unexplained.
DROP_CAUSES = {
    "stale": "stale (its block moved on before the recorder read it)",
    "no_buffer": "no free ring buffer (the writer still held them all)",
    "queue_full": "the writer's queue full (the disk fell behind)",
}


@dataclass
class TopicCounts:
    """One topic's frames written to the bag, their bytes, and the frames lost: ``dropped`` (the recorder fell
    behind: :data:`DROP_CAUSES` says how, ``drops`` counts each), ``failed`` (unreadable: invalid, or its
    conversion raised) and ``lost`` (handed to the bag, not in it: a disk error cost the chunk or transaction
    they were in)."""

    msgtype: str
    written: int = 0
    bytes: int = 0
    failed: int = 0
    lost: int = 0
    drops: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def drop(self, cause: str) -> None:
        """One frame dropped, for ``cause`` (a key of :data:`DROP_CAUSES`)."""
        with self._lock:
            self.drops[cause] = self.drops.get(cause, 0) + 1


class RecordStatus:
    """Rates since the last line, from the counts; the final table."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounts] = {}
        self.start = time.monotonic()
        self._last = (self.start, {})  # type: tuple[float, dict[str, tuple[int, int]]]

    def line(self, queued: int, capacity: int, bag_bytes: int, files: int, waiting: list[str]) -> str:
        now = time.monotonic()
        then, before = self._last
        span = max(now - then, 1e-6)
        parts = []
        for topic, c in self.topics.items():
            frames, size = before.get(topic, (0, 0))
            parts.append(f"{topic} {c.written} ({(c.written - frames) / span:.1f}/s, "
                         f"{(c.bytes - size) / span / 1e6:.1f} MB/s)")
        self._last = (now, {t: (c.written, c.bytes) for t, c in self.topics.items()})
        drops = sum(c.dropped for c in self.topics.values())
        failed = sum(c.failed for c in self.topics.values())
        wait = f" | waiting for {', '.join(waiting)}" if waiting else ""
        return (f"bag_record {now - self.start:6.1f} s | {' | '.join(parts) or 'no topic yet'} | queue "
                f"{queued}/{capacity} | dropped {drops} failed {failed} | bag {bag_bytes / 1e6:.1f} MB in {files} "
                f"file{'s' if files != 1 else ''}{wait}")

    def settle(self, in_bag: dict[str, int]) -> None:
        """Make ``written`` what the closed bag holds (``in_bag``: messages per topic); the rest counts as lost."""
        for topic, counts in self.topics.items():
            held = in_bag.get(topic, 0)
            counts.add("lost", max(counts.written - held, 0))
            counts.written = held

    def table(self) -> str:
        seconds = max(time.monotonic() - self.start, 1e-6)
        rows = [f"{'topic':30} {'type':32} {'written':>8} {'dropped':>8} {'failed':>7} {'lost':>6} {'MB':>9} "
                f"{'MB/s':>7}"]
        for topic, c in self.topics.items():
            rows.append(f"{topic:30} {c.msgtype:32} {c.written:8d} {c.dropped:8d} {c.failed:7d} {c.lost:6d} "
                        f"{c.bytes / 1e6:9.1f} {c.bytes / 1e6 / seconds:7.1f}")
        for topic, c in self.topics.items():
            if c.drops:
                rows.append(f"dropped on {topic}: " + ", ".join(f"{n} {DROP_CAUSES.get(cause, cause)}"
                                                                for cause, n in sorted(c.drops.items())))
        return "\n".join(rows)
