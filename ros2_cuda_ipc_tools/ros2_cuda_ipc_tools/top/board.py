"""The board ``top`` shows: the latest status of every pool and reader, joined per topic.

A reader says which pools it holds leases on (by pool id); a pool says its topic.  So each topic's row
gets its publisher's numbers and every reader of that pool, wherever the reader runs.  A status not
heard from for ``stale_after`` seconds (its node is gone) drops off the board.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ros2_cuda_ipc_core import STATUS_PREFIX

__all__ = ["Board", "ReaderEntry", "TopicRow", "render_table"]


@dataclass
class ReaderEntry:
    """One reader of a topic: where it runs and what it holds."""

    node: str
    pid: int
    leases: int
    rate_hz: float
    stale_drops: int
    fallback_frames: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None


@dataclass
class TopicRow:
    """One topic: its pool's publisher (if heard from) and its readers."""

    topic: str
    publisher: str = "?"
    pid: int | None = None
    memory: str = "?"
    device: str = "-"
    rate_hz: float | None = None
    blocks_in_use: int | None = None
    blocks_held: int | None = None
    blocks_free: int | None = None
    acquire_misses: int | None = None
    readers: list[ReaderEntry] = field(default_factory=list)

    @property
    def stale_drops(self) -> int:
        return sum(reader.stale_drops for reader in self.readers)

    @property
    def fallback_frames(self) -> int:
        return sum(reader.fallback_frames for reader in self.readers)

    @property
    def latency_p50_ms(self) -> float | None:
        """The slowest reader's median latency from the stamp: what the topic's last consumer sees."""
        values = [reader.latency_p50_ms for reader in self.readers if reader.latency_p50_ms is not None]
        return max(values) if values else None

    def as_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "publisher": self.publisher, "pid": self.pid, "memory": self.memory,
                "device": self.device, "rate_hz": self.rate_hz, "blocks_in_use": self.blocks_in_use,
                "blocks_held_by_readers": self.blocks_held, "blocks_free": self.blocks_free,
                "acquire_misses": self.acquire_misses, "stale_drops": self.stale_drops,
                "fallback_frames": self.fallback_frames,
                "latency_p50_ms": self.latency_p50_ms,
                "readers": [reader.__dict__ for reader in self.readers]}


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "-") else None
    except ValueError:
        return None


def _integer(text: str | None, default: int = 0) -> int:
    value = _number(text)
    return int(value) if value is not None else default


class Board:
    """The latest ros2_cuda_ipc statuses heard on ``/diagnostics`` (fed with :meth:`add`), as topic rows."""

    def __init__(self, stale_after: float = 3.0) -> None:
        self.stale_after = stale_after
        self._latest: dict[str, tuple[float, dict[str, str]]] = {}

    def add(self, array: Any, now: float | None = None) -> None:
        """Take a ``DiagnosticArray``: ours (named ``ros2_cuda_ipc ...``, with a ``kind``) are kept, the rest ignored."""
        now = time.monotonic() if now is None else now
        for status in array.status:
            if not status.name.startswith(STATUS_PREFIX):
                continue
            values = {pair.key: pair.value for pair in status.values}
            if values.get("kind") in ("pool", "reader"):
                self._latest[status.name] = (now, values)

    def _current(self, now: float) -> list[dict[str, str]]:
        self._latest = {name: entry for name, entry in self._latest.items() if now - entry[0] <= self.stale_after}
        return [values for _, values in self._latest.values()]

    def rows(self, now: float | None = None) -> list[TopicRow]:
        """One row per topic, sorted by topic; readers whose pool is not heard from get a row of their own topic."""
        current = self._current(time.monotonic() if now is None else now)
        by_pool: dict[str, TopicRow] = {}
        rows: dict[str, TopicRow] = {}
        for values in (v for v in current if v["kind"] == "pool"):
            row = TopicRow(topic=values.get("topic", "?"), publisher=values.get("node", "?"),
                           pid=_integer(values.get("pid")), memory=values.get("memory", "?"),
                           device=values.get("device", "-"), rate_hz=_number(values.get("rate_hz")),
                           blocks_in_use=_integer(values.get("blocks_in_use")),
                           blocks_held=_integer(values.get("blocks_held_by_readers")),
                           blocks_free=_integer(values.get("blocks_free")),
                           acquire_misses=_integer(values.get("acquire_misses")))
            by_pool[values.get("pool_id", "")] = row
            rows.setdefault(row.topic, row)
        for values in (v for v in current if v["kind"] == "reader"):
            leases = {}
            for pair in filter(None, values.get("pools", "").split(",")):
                pool_id, _, held = pair.partition(":")
                leases[pool_id] = _integer(held)
            mine = [by_pool[pool_id] for pool_id in leases if pool_id in by_pool]
            if not mine:  # not (or no longer) importing a pool we hear from: its own row, by its topic
                topic = values.get("topic") or "?"
                mine = [rows.setdefault(topic, TopicRow(topic=topic))]
            for row in mine:
                pool_id = next((pid for pid, r in by_pool.items() if r is row), "")
                row.readers.append(ReaderEntry(
                    node=values.get("node", "?"), pid=_integer(values.get("pid")), leases=leases.get(pool_id, 0),
                    rate_hz=_number(values.get("rate_hz")) or 0.0, stale_drops=_integer(values.get("stale_drops")),
                    fallback_frames=_integer(values.get("fallback_frames")),
                    latency_p50_ms=_number(values.get("latency_p50_ms")),
                    latency_p99_ms=_number(values.get("latency_p99_ms"))))
        return [rows[topic] for topic in sorted(rows)]


COLUMNS = ("topic", "publisher", "memory", "rate/s", "in use", "held", "free", "stale", "fallback",
           "readers (pid:leases)",
           "p50 ms")


def _cell(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render_table(rows: list[TopicRow]) -> str:
    """The board as a fixed-width text table, one line per topic."""
    if not rows:
        return "no ros2_cuda_ipc pools or readers heard on /diagnostics"
    cells = [COLUMNS]
    for row in rows:
        memory = row.memory if row.device in ("-", "") else f"{row.memory}:{row.device}"
        readers = " ".join(f"{reader.pid}:{reader.leases}" for reader in row.readers) or "-"
        publisher = row.publisher if row.pid is None else f"{row.publisher} ({row.pid})"
        cells.append((row.topic, publisher, memory, _cell(row.rate_hz, 1), _cell(row.blocks_in_use),
                      _cell(row.blocks_held), _cell(row.blocks_free), str(row.stale_drops), str(row.fallback_frames), readers,
                      _cell(row.latency_p50_ms, 1)))
    widths = [max(len(line[column]) for line in cells) for column in range(len(COLUMNS))]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip() for line in cells)
