"""The board ``top`` shows: the latest status of every pool and reader, joined per pool.

A reader says which pools it holds leases on (by pool id); a pool says its topic.  So each pool's row
gets its publisher's numbers and every reader of that pool, wherever the reader runs.  A status not
heard from for ``stale_after`` seconds (its node is gone) drops off the board.  Statuses are read with
core's :func:`read_status` and kept as sent: a number may be None (absent, not a number) or not finite,
and every string is raw (``render`` escapes them).  What the board keeps is bounded whatever is sent: at most
``MAX_STATUSES`` statuses, and a reader joins at most ``MAX_POOLS_PER_READER`` pools (a 305 KB message of readers
that each named every pool made a 139 MB snapshot); :attr:`Board.cut` says what a snapshot left out.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ros2_cuda_ipc_core import ReportedCount, ReportedStatus, read_status

__all__ = ["MAX_POOLS_PER_READER", "MAX_STATUSES", "Board", "ReaderEntry", "TopicRow"]

#: Statuses the board keeps (a new one beyond them is not kept while they are heard from): far above a machine's
#: pools and readers, far below what makes a snapshot slow.
MAX_STATUSES = 512
#: Pools one reader joins (a shared reader leases from a few; each pool named makes the reader a row's entry).
MAX_POOLS_PER_READER = 32


@dataclass
class ReaderEntry:
    """One reader of a topic: where it runs and what it holds."""

    node: str
    pid: ReportedCount
    leases: ReportedCount
    rate_hz: float | None
    stale_drops: ReportedCount
    fallback_frames: ReportedCount
    latency_p50_ms: float | None
    latency_p99_ms: float | None

    @classmethod
    def of(cls, status: ReportedStatus, leases: ReportedCount) -> ReaderEntry:
        return cls(node=status.text("node"), pid=status.count("pid"), leases=leases, rate_hz=status.number("rate_hz"),
                   stale_drops=status.count("stale_drops"), fallback_frames=status.count("fallback_frames"),
                   latency_p50_ms=status.number("latency_p50_ms"), latency_p99_ms=status.number("latency_p99_ms"))

    @property
    def order(self) -> tuple[str, str]:
        """Where it sorts among a topic's readers: the same order in every view and every snapshot."""
        return self.node, str(self.pid)


@dataclass
class TopicRow:
    """One pool of a topic: its publisher (if heard from) and its readers."""

    topic: str
    publisher: str = "?"
    pid: ReportedCount = None
    memory: str = "?"
    device: str = "-"
    rate_hz: float | None = None
    blocks_in_use: ReportedCount = None
    blocks_held: ReportedCount = None
    blocks_free: ReportedCount = None
    acquire_misses: ReportedCount = None
    readers: list[ReaderEntry] = field(default_factory=list)

    @classmethod
    def of_pool(cls, status: ReportedStatus) -> TopicRow:
        return cls(topic=status.text("topic"), publisher=status.text("node"), pid=status.count("pid"),
                   memory=status.text("memory"), device=status.text("device", "-"), rate_hz=status.number("rate_hz"),
                   blocks_in_use=status.count("blocks_in_use"), blocks_held=status.count("blocks_held_by_readers"),
                   blocks_free=status.count("blocks_free"), acquire_misses=status.count("acquire_misses"))

    @property
    def order(self) -> tuple[str, str, str]:
        return self.topic, self.publisher, str(self.pid)

    @property
    def stale_drops(self) -> ReportedCount:
        return sum((reader.stale_drops or 0) for reader in self.readers)

    @property
    def fallback_frames(self) -> ReportedCount:
        return sum((reader.fallback_frames or 0) for reader in self.readers)

    @property
    def latency_p50_ms(self) -> float | None:
        """The slowest reader's median latency from the stamp: what the topic's last consumer sees (a NaN is no
        latency: left out)."""
        values = [reader.latency_p50_ms for reader in self.readers
                  if reader.latency_p50_ms is not None and not math.isnan(reader.latency_p50_ms)]
        return max(values) if values else None

    def as_json(self, readers: int | None = None) -> dict[str, Any]:
        """The row's values as reported (numbers maybe not finite: ``render`` makes them strict), its first ``readers``
        readers (all: None)."""
        return {"topic": self.topic, "publisher": self.publisher, "pid": self.pid, "memory": self.memory,
                "device": self.device, "rate_hz": self.rate_hz, "blocks_in_use": self.blocks_in_use,
                "blocks_held_by_readers": self.blocks_held, "blocks_free": self.blocks_free,
                "acquire_misses": self.acquire_misses, "stale_drops": self.stale_drops,
                "fallback_frames": self.fallback_frames,
                "latency_p50_ms": self.latency_p50_ms,
                "readers": [dict(vars(reader)) for reader in self.readers[:readers]]}


class Board:
    """The latest ros2_cuda_ipc statuses heard on ``/diagnostics`` (fed with :meth:`add`), as pool rows."""

    def __init__(self, stale_after: float = 3.0) -> None:
        self.stale_after = stale_after
        self._latest: dict[str, tuple[float, ReportedStatus]] = {}
        self._not_kept = 0
        #: What the last :meth:`rows` left out: ``statuses`` not kept (the board was full) since the snapshot before,
        #: and ``pools`` that readers named beyond ``MAX_POOLS_PER_READER`` each.
        self.cut: dict[str, int] = {"statuses": 0, "pools": 0}

    def add(self, array: Any, now: float | None = None) -> None:
        """Take a ``DiagnosticArray``: ours (named ``ros2_cuda_ipc ...``, with a ``kind``) are kept, the rest ignored."""
        now = time.monotonic() if now is None else now
        for status in filter(None, map(read_status, array.status)):
            if status.name not in self._latest and len(self._latest) >= MAX_STATUSES:
                self._forget_stale(now)
                if len(self._latest) >= MAX_STATUSES:
                    self._not_kept += 1
                    continue
            self._latest[status.name] = (now, status)

    def _forget_stale(self, now: float) -> None:
        self._latest = {name: entry for name, entry in self._latest.items() if now - entry[0] <= self.stale_after}

    def _current(self, now: float) -> list[ReportedStatus]:
        self._forget_stale(now)
        return [self._latest[name][1] for name in sorted(self._latest)]

    def rows(self, now: float | None = None) -> list[TopicRow]:
        """One row per pool (by topic, then publisher), each with its readers (by node); a reader whose pool is not
        heard from joins its topic's first row, or gets a row of its own."""
        current = self._current(time.monotonic() if now is None else now)
        by_pool: dict[str, TopicRow] = {}
        by_topic: dict[str, list[TopicRow]] = {}
        pools_cut = 0
        for status in (s for s in current if s.kind == "pool"):
            row = TopicRow.of_pool(status)
            by_pool.setdefault(status.text("pool_id", ""), row)  # two claiming one pool id: its readers join the first
            by_topic.setdefault(row.topic, []).append(row)
        for status in (s for s in current if s.kind == "reader"):
            leases = list(status.leases().items())
            pools_cut += max(0, len(leases) - MAX_POOLS_PER_READER)
            mine = [(by_pool[pool_id], held) for pool_id, held in leases[:MAX_POOLS_PER_READER] if pool_id in by_pool]
            if not mine:  # not (or no longer) importing a pool we hear from: its topic's row
                topic = status.text("topic")
                topic_rows = by_topic.setdefault(topic, [])
                if not topic_rows:
                    topic_rows.append(TopicRow(topic=topic))
                mine = [(topic_rows[0], 0)]
            entry = ReaderEntry.of(status, None)  # its numbers read once, however many rows it joins
            for row, held in mine:
                row.readers.append(replace(entry, leases=held))
        rows = sorted((row for rows in by_topic.values() for row in rows), key=lambda row: row.order)
        for row in rows:
            row.readers.sort(key=lambda reader: reader.order)
        self.cut = {"statuses": self._not_kept, "pools": pools_cut}
        self._not_kept = 0
        return rows
