"""``StatsTable``: the pipeline's live table, made from the nodes' ``pipeline_stats`` reports.

Per node: frames in and out per second (between its last two reports), latency from the
camera's stamp p50 / p99 over its last period and the steady state's p99 (after the node's
warm-up frames), its process's CPU per frame (ms) and share of one core over the last period,
frames checked and bad, stale drops, frames lost on the way, leases held now, reads served from
a pool of the same process, how often the runner restarted it, and what the node sends when it
says (``GpuTensor 1x3x224x224 float16``, say). A restarted node's counters
start again at zero: the table adds its earlier lives' totals, so checked and bad count the run, and
lost counts the frames the camera numbered between one life's last reported frame and the next life's first.
The table of a run that is over (``render(totals=True)``) shows the whole run instead of the last
period, which after the source stopped holds no frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .reports import COUNTERS, Report

__all__ = ["StatsTable"]

_COLUMNS = (("node", 12), ("in/s", 7), ("out/s", 7), ("p50 ms", 8), ("p99 ms", 8), ("p99 st", 8), ("cpu ms/f", 9),
            ("cpu %", 7), ("checked", 8), ("bad", 5), ("stale", 6), ("lost", 5), ("leases", 7), ("same-proc", 10),
            ("restarts", 9), ("  sends", 32))
_MAX_PUBLISHERS = 256  # publisher processes a node's taken-in counts are kept for


class StatsTable:
    """Keeps each node's last two reports; :meth:`render` prints them as rows, in the pipeline's order.

    A restarted node's counters add its ended lives' (each life's last report).  A life killed outright did
    not report the frames it sent in its last second, though its readers got them and reported them: the
    source's frames published count, for each of its ended lives, at least what one reader took in from that
    life's process (the reports' ``in_by_publisher``).  So no reader shows more frames checked than were sent."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.latest: dict[str, dict[str, Any]] = {}
        self.restarts: dict[str, int] = {}
        self._previous: dict[str, dict[str, Any]] = {}
        self._ended: dict[str, list[_EndedLife]] = {}
        self._taken_in: dict[tuple[str, int], dict[int, int]] = {}  # (node, its pid): frames by publisher pid
        self._final: set[str] = set()

    def add(self, name: str, report: Report) -> None:
        """Node ``name``'s report, checked already (:class:`.reports.ReportGate`); the table keeps its own copy.
        Ignored once :meth:`keep_final` was called for ``name``."""
        if name in self._final:
            return
        report = dict(report)
        last = self.latest.get(name)
        if last is not None and last["pid"] != report["pid"]:  # a new life of a restarted node
            self._ended.setdefault(name, []).append(_EndedLife(last["pid"], last["counts_this_life"],
                                                               last.get("seq_first"), last.get("seq_last")))
        report["counts_this_life"] = {key: report[key] for key in COUNTERS}
        report["checked_this_life"] = report["checked"]
        self._count_taken_in(name, report)
        ended = self._ended.get(name, [])
        for life in ended:
            report.update({key: report[key] + life.counts[key] for key in COUNTERS})
            if self.order and name == self.order[0]:  # its unreported last frames, as its readers counted them
                report["out"] += max(0, self.taken_in_from(life.pid) - life.counts["out"])
        if ended:
            this_life = _EndedLife(report["pid"], {}, report.get("seq_first"), report.get("seq_last"))
            report["lost"] += _lost_between_lives([*ended, this_life])
        report["restarts"] = self.restarts.get(name, 0)
        if last is not None:
            self._previous[name] = last
        self.latest[name] = report

    def _count_taken_in(self, name: str, report: Report) -> None:
        """Keep the highest count of frames this life of ``name`` took in from each publisher pid (publishers past
        the first few hundred are left out)."""
        counts = self._taken_in.setdefault((name, report["pid"]), {})
        for pid, taken in report.get("in_by_publisher", {}).items():
            if int(pid) not in counts and len(counts) >= _MAX_PUBLISHERS:
                continue
            counts[int(pid)] = max(counts.get(int(pid), 0), taken)

    def taken_in_from(self, publisher_pid: int) -> int:
        """The most frames one node (all its lives) reported taking in from the process ``publisher_pid``."""
        by_node: dict[str, int] = {}
        for (name, _), counts in self._taken_in.items():
            by_node[name] = by_node.get(name, 0) + counts.get(publisher_pid, 0)
        return max(by_node.values(), default=0)

    def keep_final(self, name: str) -> None:
        """``name``'s latest report is its last: later ones are ignored.  After Ctrl-C the runner takes the nodes'
        last reports in an order that keeps each count at least the next node's, while frames still flow; a node's
        once-a-second report arriving after that would break the order (inference's 37 checked against the 36
        preprocess sent, in the GPU suite's composed run)."""
        self._final.add(name)

    def restarted(self, name: str) -> None:
        """The runner started ``name`` again."""
        self.restarts[name] = self.restarts.get(name, 0) + 1

    def rate(self, name: str, key: str) -> float | None:
        now, before = self.latest.get(name), self._previous.get(name)
        if now is None or before is None or now["time"] <= before["time"]:
            return None
        return (now[key] - before[key]) / (now["time"] - before["time"])

    def source_seconds(self) -> float | None:
        """How long the source has sent frames (its first to its last), from its latest report."""
        source = self.latest.get(self.order[0]) if self.order else None
        return (source or {}).get("elapsed_s") or None

    def run_rate(self, name: str, key: str) -> float | None:
        """Frames a second over the whole run: the node's count over the source's :meth:`source_seconds`."""
        seconds, report = self.source_seconds(), self.latest.get(name)
        return report[key] / seconds if seconds and report is not None else None

    def rows(self, totals: bool = False) -> list[list[str]]:
        """A row per node: its last period (rates between its last two reports), or with ``totals`` the whole run
        (rates over the source's sending time, latency over every frame, CPU a frame in the steady state)."""
        rate = self.run_rate if totals else self.rate
        rows = []
        for name in [*self.order, *sorted(set(self.latest) - set(self.order))]:
            report = self.latest.get(name)
            if report is None:
                rows.append([name, "(not reporting yet)"])
                continue
            is_source = bool(report.get("source"))
            latency, cpu = report.get("latency_ms_total" if totals else "latency_ms") or {}, report.get("cpu") or {}
            rows.append([name, _number(None if is_source else rate(name, "in")), _number(rate(name, "out")),
                         _number(latency.get("p50")), _number(latency.get("p99")),
                         _number((report.get("latency_ms_steady") or {}).get("p99")),
                         _number(cpu.get("cpu_ms_per_frame_steady" if totals else "cpu_ms_per_frame")),
                         _number(None if totals else cpu.get("cpu_percent")),
                         *("-" if is_source else str(report[key]) for key in ("checked", "bad", "stale", "lost")),
                         str(report.get("leases_held", "-")),
                         "-" if is_source else str(report.get("same_process_reads", "-")),
                         str(self.restarts.get(name, 0)), "  " + str(report.get("output", "-"))])
        return rows

    def shared_processes(self) -> list[list[str]]:
        """Groups of nodes that report from one process (composed): their CPU columns are that process's."""
        by_pid: dict[int, list[str]] = {}
        for name, report in self.latest.items():
            by_pid.setdefault(report["pid"], []).append(name)
        return [sorted(names) for names in by_pid.values() if len(names) > 1]

    def render(self, totals: bool = False) -> str:
        """The table of :meth:`rows`; with ``totals``, a line says what its figures are over."""
        header = "".join(title.ljust(width) if i in (0, len(_COLUMNS) - 1) else title.rjust(width)
                         for i, (title, width) in enumerate(_COLUMNS)).rstrip()
        lines = [header]
        for row in self.rows(totals):
            if len(row) == 2:
                lines.append(row[0].ljust(_COLUMNS[0][1]) + row[1])
            else:
                lines.append("".join(cell.ljust(width) if i in (0, len(row) - 1) else cell.rjust(width)
                                     for i, (cell, (_, width)) in enumerate(zip(row, _COLUMNS, strict=True))).rstrip())
        for names in self.shared_processes():
            lines.append(f"(cpu of {', '.join(names)}: their one process's)")
        if totals:
            seconds = self.source_seconds()
            over = f"the {self.order[0]}'s {seconds:.1f} s of sending" if seconds else "no frame sent"
            lines.append(f"(the whole run: in/s and out/s over {over}; p50 and p99 over every frame; "
                         "cpu ms/f in the steady state)")
        return "\n".join(lines)


@dataclass(frozen=True)
class _EndedLife:
    """A restarted node's earlier process: its pid, its own counters, and the first and last camera frame numbers
    it reported seeing (None: none)."""

    pid: int
    counts: dict[str, int]
    seq_first: int | None
    seq_last: int | None


def _lost_between_lives(lives: list[_EndedLife]) -> int:
    """Frames the camera numbered between one life's last reported frame and the next life's first: lost to the
    restart (frames a life read after its last report count too: no report says they were checked).  A restarted
    camera numbers from 0 again: no gap is counted across that."""
    lost, last = 0, None
    for life in lives:
        if last is not None and life.seq_first is not None:
            lost += max(0, life.seq_first - last - 1)
        if life.seq_last is not None:
            last = life.seq_last
    return lost


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 1000 else f"{value:.0f}"
