"""What a pipeline node measures per frame beyond counting: latency apart from warm-up, CPU, GC pauses.

A short run's tail is mostly warm-up (the first pool import, torch's first kernels, caches filling):
:class:`LatencySamples` keeps the first ``warmup_frames`` apart, so the steady state's p99 is not
the first second's. :class:`ProcessCpu` reads the process's own CPU counters (user + system, every
thread) at each report: milliseconds of CPU per frame and percent of one core, over the last period
and since warm-up ended, the steady state's also by thread (:func:`thread_cpu`: is it the executor and the
callbacks, or DDS's own threads?). Nodes composed in one process share these counters. :func:`gc_pauses`
counts the collector's pauses (``gc.callbacks``), a usual suspect for a tail frame.
:class:`FrameTrace` writes one JSON line a frame (``trace_path``): how long the frame waited for its
callback since the camera's stamp (DDS and the executor's wake-up), the read (lease and import), the
node's work, the release, and the collector's pauses within; :func:`tail_breakdown` says where the
slowest frames' time went.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import time
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = ["FrameTrace", "LatencySamples", "ProcessCpu", "gc_pauses", "percentiles", "tail_breakdown", "thread_cpu"]

_MAX_SAMPLES = 100_000


def percentiles(samples: list[float]) -> dict[str, float | None]:
    """p50 / p99 / n of ``samples`` (milliseconds), rounded for a report."""
    if not samples:
        return {"p50": None, "p99": None, "n": 0}
    p50, p99 = np.percentile(samples, [50, 99])
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3), "n": len(samples)}


class LatencySamples:
    """Latency samples of one node: the first ``warmup_frames`` kept apart from the steady state, and the
    samples since the last report (the live table's window)."""

    def __init__(self, warmup_frames: int) -> None:
        self.warmup_frames = warmup_frames
        self._warmup: list[float] = []
        self._steady: list[float] = []
        self._window: list[float] = []

    @property
    def warmed_up(self) -> bool:
        return len(self._warmup) >= self.warmup_frames

    def add(self, milliseconds: float) -> None:
        target = self._steady if self.warmed_up else self._warmup
        if len(target) < _MAX_SAMPLES:
            target.append(milliseconds)
        self._window.append(milliseconds)

    def report(self) -> dict[str, Any]:
        """The window's percentiles (and a new window), the warm-up's, the steady state's and the whole run's."""
        window, self._window = self._window, []
        return {"latency_ms": percentiles(window), "latency_ms_warmup": percentiles(self._warmup),
                "latency_ms_steady": percentiles(self._steady),
                "latency_ms_total": percentiles(self._warmup + self._steady)}


_THREAD_KINDS = 16  # kinds of thread a report names at most
_NUMBERED = re.compile(r"[.\d]+$")  # a thread name's instance number or port: dds.rx.7412 -> dds.rx


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Each live thread of this process: its kind and its CPU seconds so far (``/proc/self/task/*/schedstat``, in
    ns; {} where there is none).  The kind is ``main`` (the executor and the callbacks it runs), ``python`` (the
    other threads named as the process is: Python's own, a direct subscription's), else the thread's name without
    its number (Fast DDS's ``dds.rx``, ``dds.shm``, ``dds.ev``; the CUDA driver's)."""
    main = os.getpid()
    threads: dict[int, tuple[str, float]] = {}
    try:
        tids = [int(tid) for tid in os.listdir("/proc/self/task")]
        with open("/proc/self/comm") as comm:
            process_name = _NUMBERED.sub("", comm.read().strip())
    except (OSError, ValueError):
        return threads
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as stat:
                nanoseconds = int(stat.read().split()[0])
            with open(f"/proc/self/task/{tid}/comm") as comm:
                name = _NUMBERED.sub("", comm.read().strip()) or "unnamed"
        except (OSError, ValueError, IndexError):  # it ended meanwhile
            continue
        kind = "main" if tid == main else "python" if name == process_name else name
        threads[tid] = (kind, nanoseconds / 1e9)
    return threads


class ProcessCpu:
    """CPU time of this process between reports, per frame and as a share of one core."""

    def __init__(self) -> None:
        self._last = (time.process_time(), time.monotonic(), 0)
        self._steady_from: tuple[float, int] | None = None
        self._threads_from: dict[int, tuple[str, float]] = {}

    def steady_from_now(self, frames: int) -> None:
        """Warm-up is over: count the steady state's CPU from here (once)."""
        if self._steady_from is None:
            self._steady_from = (time.process_time(), frames)
            self._threads_from = thread_cpu()

    def _steady_by_thread(self, cpu: float, frames: int) -> dict[str, float]:
        """The steady state's CPU ms a frame by thread kind; ``ended``: threads gone since (what the rest miss)."""
        assert self._steady_from is not None
        spent: dict[str, float] = {}
        for tid, (kind, seconds) in thread_cpu().items():
            before = self._threads_from.get(tid)
            spent[kind] = spent.get(kind, 0.0) + seconds - (before[1] if before is not None and before[0] == kind else 0.0)
        if spent:
            spent["ended"] = max(0.0, cpu - self._steady_from[0] - sum(spent.values()))
        largest = sorted(spent.items(), key=lambda item: -item[1])
        if len(largest) > _THREAD_KINDS:  # a report stays small: the smallest kinds together
            largest[_THREAD_KINDS - 1:] = [("other", sum(seconds for _, seconds in largest[_THREAD_KINDS - 1:]))]
        count = frames - self._steady_from[1]
        return {kind: round(seconds * 1e3 / count, 3) for kind, seconds in largest}

    def report(self, frames: int) -> dict[str, Any]:
        """``frames``: this node's frame count so far (in for a consumer, out for a source)."""
        cpu, wall = time.process_time(), time.monotonic()
        last_cpu, last_wall, last_frames = self._last
        self._last = (cpu, wall, frames)
        period_frames = frames - last_frames
        steady = by_thread = None
        if self._steady_from is not None and frames > self._steady_from[1]:
            steady = round((cpu - self._steady_from[0]) * 1e3 / (frames - self._steady_from[1]), 3)
            by_thread = self._steady_by_thread(cpu, frames)
        return {"cpu_s": round(cpu, 3),
                "cpu_percent": round((cpu - last_cpu) * 100 / (wall - last_wall), 1) if wall > last_wall else None,
                "cpu_ms_per_frame": round((cpu - last_cpu) * 1e3 / period_frames, 3) if period_frames > 0 else None,
                "cpu_ms_per_frame_steady": steady, "cpu_ms_per_frame_steady_by_thread": by_thread}


class _GcPauses:
    """``gc.callbacks`` entry: the collector's pauses (count, total, longest).

    A stop signal never raises in it: nodes run under core's ``run_nodes``, which notes SIGINT and SIGTERM instead
    of raising ``KeyboardInterrupt`` wherever Python happens to be (once it landed here, on the H200, and was
    printed as "Exception ignored in _GcPauses" and lost).
    """

    def __init__(self) -> None:
        self.count, self.total, self.longest = 0, 0.0, 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        self.count += 1
        self.total += pause
        self.longest = max(self.longest, pause)

    def report(self) -> dict[str, Any]:
        return {"count": self.count, "total_ms": round(self.total * 1e3, 3), "longest_ms": round(self.longest * 1e3, 3)}


_PAUSES: _GcPauses | None = None


def gc_pauses() -> _GcPauses:
    """The process's collector pauses, counted from the first call on (one hook a process)."""
    global _PAUSES
    if _PAUSES is None:
        _PAUSES = _GcPauses()
        gc.callbacks.append(_PAUSES)
    return _PAUSES


#: The steps of a traced frame, in order: milliseconds each.
STEPS = ("wake_ms", "read_ms", "work_ms", "release_ms")


class FrameTrace:
    """One JSON line per frame into ``path``: its latency, :data:`STEPS` and ``gc_ms`` (pauses within it).

    Appended, a line at a time: a node the runner restarts adds its new life's frames after the killed life's,
    which keeps every line it wrote (the runner removes a run's old traces when it starts)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._out: IO[str] = path.open("a", buffering=1)
        if self._out.tell() and not _ends_a_line(path):  # a life killed mid-line: its torn line stays apart
            self._out.write("\n")
        self._pauses = gc_pauses()
        self._gc_at_start = 0.0
        self._marks: list[float] = []

    def start(self, waited_ms: float) -> None:
        """The callback began, ``waited_ms`` after the camera's stamp."""
        self._wake = waited_ms
        self._gc_at_start = self._pauses.total
        self._marks = [time.perf_counter()]

    def mark(self) -> None:
        """The end of the next step (read, work, release)."""
        self._marks.append(time.perf_counter())

    def finish(self, latency_ms: float | None) -> None:
        steps = [(b - a) * 1e3 for a, b in zip(self._marks, self._marks[1:], strict=False)]
        record = {"latency_ms": latency_ms, "wake_ms": round(self._wake, 3),
                  **{name: round(value, 3) for name, value in zip(STEPS[1:], steps, strict=False)},
                  "gc_ms": round((self._pauses.total - self._gc_at_start) * 1e3, 3)}
        self._out.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self._out.close()


def _ends_a_line(path: Path) -> bool:
    with path.open("rb") as trace:
        trace.seek(-1, 2)
        return trace.read(1) == b"\n"


def _record(line: str) -> dict[str, Any] | None:
    """A trace line's record; None for a line a killed life left torn (or anything else that is not one)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def tail_breakdown(path: Path, tail: float = 0.99) -> dict[str, Any]:
    """Of the slowest frames of a trace (the ``1 - tail`` share): how many, and the median of each
    step (and of the GC pauses), beside the median frame's: where a slow frame's extra time went."""
    records = [r for r in map(_record, path.read_text(errors="replace").splitlines()) if r is not None]
    records = [r for r in records if r.get("latency_ms") is not None]
    if not records:
        return {"frames": 0}
    ranked = sorted(records, key=lambda r: r["latency_ms"], reverse=True)
    slow = ranked[: max(1, math.ceil(round(len(ranked) * (1 - tail), 6)))]  # the slowest 1% (ties cannot swell it)
    cut = slow[-1]["latency_ms"]

    def medians(rows: list[dict[str, Any]]) -> dict[str, float]:
        return {key: round(float(np.median([r.get(key, 0.0) for r in rows])), 3)
                for key in ("latency_ms", *STEPS, "gc_ms")}

    return {"frames": len(records), "tail_frames": len(slow), "tail_from_ms": round(cut, 3),
            "tail": medians(slow), "median_frame": medians(records)}
