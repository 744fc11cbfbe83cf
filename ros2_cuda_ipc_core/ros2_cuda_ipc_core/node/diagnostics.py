"""``/diagnostics``: every pool and typed reader says, once a second, what it holds and how it fares.

Standard ``diagnostic_msgs/DiagnosticArray`` messages, so ``rqt_runtime_monitor``, foxglove, any
diagnostics aggregator and ``cuda_ipc_top`` show the same numbers.  One :class:`DiagnosticsReporter`
per node publishes one array a second with a status per source (a typed publisher's pool, a typed
reader) registered on that node.  A node turns it off with its ``diagnostics`` parameter
(``-p diagnostics:=false``), a publisher or reader with its ``diagnostics=False`` keyword.

Every status's ``values`` are plain key/value strings; ``kind`` is ``pool`` or ``reader``, and the keys
each has are in :mod:`.diagnostics_format`, which also reads them back (what ``top`` does).
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .diagnostics_format import NO_VALUE, REPORT_PERIOD_S, STATUS_PREFIX, format_leases

__all__ = ["DIAGNOSTICS_PARAMETER", "DIAGNOSTICS_TOPIC", "DiagnosticsReporter", "PoolDiagnostics", "ReaderDiagnostics",
           "diagnostics_enabled", "stamp_read"]

DIAGNOSTICS_TOPIC = "/diagnostics"
DIAGNOSTICS_PARAMETER = "diagnostics"

#: A source: (level 0 OK / 1 WARN / 2 ERROR, message, values) for the status named when it was added.
Source = Callable[[float], "tuple[int, str, dict[str, Any]]"]


def diagnostics_enabled(node: Any) -> bool:
    """The node's ``diagnostics`` parameter (declared here, default true, if the node has not declared it)."""
    if not node.has_parameter(DIAGNOSTICS_PARAMETER):
        from rcl_interfaces.msg import ParameterDescriptor

        node.declare_parameter(DIAGNOSTICS_PARAMETER, True, ParameterDescriptor(
            description="publish this node's pools and readers on /diagnostics once a second"))
    return node.get_parameter(DIAGNOSTICS_PARAMETER).value is not False


class DiagnosticsReporter:
    """The one ``/diagnostics`` publisher and 1 Hz timer of a node, shared by its pools and readers."""

    _by_node: weakref.WeakKeyDictionary[Any, DiagnosticsReporter] = weakref.WeakKeyDictionary()

    @classmethod
    def for_node(cls, node: Any) -> DiagnosticsReporter | None:
        """The node's reporter, made on first use; None when the node's ``diagnostics`` parameter is false."""
        reporter = cls._by_node.get(node)
        if reporter is None or reporter.is_closed:
            if not diagnostics_enabled(node):
                return None
            reporter = cls._by_node[node] = cls(node)
        return reporter

    def __init__(self, node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self._node = node
        self._sources: dict[int, tuple[str, str, Source]] = {}
        self._next_key = 0
        self._publisher: Any = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        self._timer: Any = node.create_timer(REPORT_PERIOD_S, self.publish)
        self._closed = False

    @property
    def is_closed(self) -> bool:
        return self._closed

    def add(self, name: str, hardware_id: str, source: Source) -> int:
        """Report ``source`` as the status ``name`` from now on; returns the key :meth:`remove` takes."""
        self._next_key += 1
        self._sources[self._next_key] = (name, hardware_id, source)
        return self._next_key

    def remove(self, key: int) -> None:
        """Stop reporting a source; the last one gone closes the reporter (its timer and publisher)."""
        self._sources.pop(key, None)
        if not self._sources:
            self.close()

    def statuses(self, period: float = REPORT_PERIOD_S) -> list[Any]:
        """A ``DiagnosticStatus`` per source, now."""
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

        statuses = []
        for name, hardware_id, source in list(self._sources.values()):
            level, message, values = source(period)
            statuses.append(DiagnosticStatus(level=bytes([level]), name=name, message=message, hardware_id=hardware_id,
                                             values=[KeyValue(key=key, value=str(value)) for key, value in values.items()]))
        return statuses

    def publish(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        if self._closed or not self._sources:
            return
        array = DiagnosticArray(status=self.statuses())
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(array)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._sources.clear()
        try:  # the node may be destroyed already (its timer and publisher with it)
            self._node.destroy_timer(self._timer)
            self._node.destroy_publisher(self._publisher)
        except Exception:
            pass

    def __enter__(self) -> DiagnosticsReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _resolved_topic(node: Any, topic: str) -> str:
    resolve = getattr(node, "resolve_topic_name", None)  # rclpy newer than Humble's first releases
    return str(resolve(topic)) if resolve is not None else topic


class _Reported:
    """A source registered with its node's reporter (none when the node's diagnostics are off) until closed."""

    _reporter: DiagnosticsReporter | None = None
    _key: int | None = None

    def _report(self, node: Any, name: str, hardware_id: str) -> None:
        self._reporter = DiagnosticsReporter.for_node(node)
        if self._reporter is not None:
            self._key = self._reporter.add(f"{STATUS_PREFIX}{name}", hardware_id, self.status)

    def status(self, period: float) -> tuple[int, str, dict[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        if self._reporter is not None and self._key is not None:
            self._reporter.remove(self._key)
            self._key = None


class PoolDiagnostics(_Reported):
    """A typed publisher's pool as a status: blocks in use / held by readers / free, the publish rate, misses."""

    def __init__(self, node: Any, topic: str, pool: Any) -> None:
        self._pool = pool
        self._identity = {"kind": "pool", "topic": _resolved_topic(node, topic),
                          "node": node.get_fully_qualified_name(), "pid": os.getpid(), "pool_id": pool.pool_id.hex(),
                          "memory": pool.memory, "device": pool.device if pool.memory == "cuda" else "-",
                          "block_count": pool.block_count, "block_size": pool.block_size}
        self._last = {"published": 0, "acquire_misses": 0}
        self._report(node, f"pool: {self._identity['topic']}", pool.pool_id.hex())

    def status(self, period: float) -> tuple[int, str, dict[str, Any]]:
        stats = self._pool.stats()
        in_use, held = stats["blocks_borrowed"], stats["blocks_held_by_readers"]
        rate = (stats["published"] - self._last["published"]) / period
        missed = stats["acquire_misses"] - self._last["acquire_misses"]
        self._last = {"published": stats["published"], "acquire_misses": stats["acquire_misses"]}
        values = {**self._identity, "blocks_in_use": in_use, "blocks_held_by_readers": held,
                  "blocks_free": max(0, self._pool.block_count - in_use - held), "published": stats["published"],
                  "rate_hz": f"{rate:.1f}", "acquire_misses": stats["acquire_misses"],
                  "fd_handouts": stats["fd_handouts"], "refused_peers": stats["refused_peers"]}
        if missed:
            return 1, f"{missed} publishes found every block in use", values
        return 0, f"{rate:.1f} Hz, {held} of {self._pool.block_count} blocks held by readers", values


class ReaderDiagnostics(_Reported):
    """A typed reader as a status: reads and their rate, stale drops, leases held per pool, latency from the stamp.

    Its numbers are its core ``Reader``'s, whichever typed reader read through it: so is its latency, noted by
    :func:`stamp_read` for every read through that ``Reader`` (inference reads tensors through a ``TensorReader``
    made without ``node=`` that shares its reporting ``ImageReader``'s ``Reader``: its latency was never reported).
    """

    def __init__(self, node: Any, topic: str | None, reader: Any) -> None:
        self._reader = reader
        self._latencies: list[float] = []
        name = node.get_fully_qualified_name()
        self._identity = {"kind": "reader", "topic": _resolved_topic(node, topic) if topic else "", "node": name,
                          "pid": os.getpid()}
        self._last = {"reads": 0, "stale_drops": 0}
        self._report(node, f"reader: {name} {self._identity['topic']}".rstrip(), f"pid {os.getpid()}")
        _REPORTS_OF.setdefault(reader, []).append(self)

    def stamped(self, stamp: Any) -> None:
        """Note the latency of a message read now from its header's ``stamp`` (ROS time: the system clock)."""
        if len(self._latencies) < 100_000:
            self._latencies.append((time.time_ns() - (stamp.sec * 1_000_000_000 + stamp.nanosec)) / 1e6)

    def close(self) -> None:
        reports = _REPORTS_OF.get(self._reader, [])
        if self in reports:
            reports.remove(self)
        super().close()

    def status(self, period: float) -> tuple[int, str, dict[str, Any]]:
        stats = self._reader.stats()
        window, self._latencies = self._latencies, []
        p50, p99 = (f"{value:.2f}" for value in np.percentile(window, [50, 99])) if window else (NO_VALUE, NO_VALUE)
        rate = (stats["reads"] - self._last["reads"]) / period
        stale = stats["stale_drops"] - self._last["stale_drops"]
        self._last = {"reads": stats["reads"], "stale_drops": stats["stale_drops"]}
        pools = format_leases(self._reader.leases_by_pool())
        values = {**self._identity, "reads": stats["reads"], "rate_hz": f"{rate:.1f}", "stale_drops": stats["stale_drops"],
                  "invalid_descriptors": stats["invalid_descriptors"], "unavailable": stats["unavailable"],
                  # frames a typed subscription got through a CPU twin instead of the pool (0 where there is none)
                  "fallback_frames": stats.get("fallback_frames", 0),
                  "leases_held": stats["leases_held"], "latency_p50_ms": p50, "latency_p99_ms": p99, "pools": pools}
        if stale:
            return 1, f"{stale} stale frames dropped in the last {period:g} s", values
        return 0, f"{rate:.1f} Hz, {stats['leases_held']} leases held", values


#: The reports of each core ``Reader`` (weakly: a Reader gone takes its entry along).
_REPORTS_OF: weakref.WeakKeyDictionary[Any, list[ReaderDiagnostics]] = weakref.WeakKeyDictionary()


def stamp_read(reader: Any, stamp: Any) -> None:
    """Note a message of header ``stamp`` read now through core ``reader``, on every report of that reader."""
    for report in tuple(_REPORTS_OF.get(reader, ())):
        report.stamped(stamp)
