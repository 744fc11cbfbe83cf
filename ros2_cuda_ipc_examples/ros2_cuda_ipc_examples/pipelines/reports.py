"""A ``pipeline_stats`` report read as what it is: text from the network.

:func:`parse_report` turns a message into a checked report or raises :class:`ReportRejected`: the text is at most
:data:`MAX_REPORT_CHARS` (checked before it is parsed), its JSON holds no NaN, infinity or integer of more digits
than a counter needs, nests no deeper than :data:`MAX_DEPTH`, every string in it is printable (no escape sequence
reaches a terminal) and short, and the fields the runner reads have their types: counters are non-negative
integers (``true`` is no number), the node is a ROS name, the pid a pid, the publishers' pids decimal digits.  Its
cost is one pass over the input: time and memory a constant times the message's size.

:class:`ReportGate` then accepts only what the runner's own nodes sent (see :mod:`..nodes.report_signature`):
signed with the run's key, from a node of the pipeline, by the process running it now, newer than that node's
last report.  Anything else is counted by why, with one warning line the first time; nothing raises, but for a
report signed with the run's key that does not parse: only its own nodes hold the key, so that is a bug in one of
them (:class:`OwnReportMalformed`), which a run must not outwait.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from ..nodes.report_signature import signed_body

__all__ = ["COUNTERS", "MAX_DEPTH", "MAX_REPORT_CHARS", "OwnReportMalformed", "Report", "ReportGate", "ReportRejected",
           "parse_report"]

#: A genuine report is about 1 KiB (its lists are capped by the node); anything past this is not one.
MAX_REPORT_CHARS = 32 * 1024
MAX_DEPTH = 4  # the report's object, a section (cpu, latency_ms), a list in it (first_drops), its entry
MAX_STRING = 512  # characters of one string in a report
MAX_COUNT = 10**15  # no counter of a run gets near this
MAX_PID = 1 << 22  # the kernel's pid_max ceiling
MAX_PUBLISHERS = 64  # entries of in_by_publisher (a node keeps 16)
MAX_THREAD_KINDS = 32  # entries of the CPU's split by thread (a node sends 16 at most)
_BY_THREAD = "cpu_ms_per_frame_steady_by_thread"
#: The counters a node's report holds since its process started.
COUNTERS = ("in", "out", "checked", "bad", "stale", "lost", "gone")
_NODE_NAME = re.compile(r"(?:/[A-Za-z_][A-Za-z0-9_]{0,254}){1,16}")
_DECIMAL = re.compile(r"[0-9]{1,7}")
_INTEGERS = ("leases_held", "same_process_reads", "reads", "imports", "acquire_misses")
_OPTIONAL_SEQ = ("first_seq", "last_seq")
_LATENCIES = ("latency_ms", "latency_ms_total", "latency_ms_steady", "latency_ms_warmup")
_FLAGS = ("source", "done")
_NAMES = ("kind", "output", "input", "memory")

#: A checked report: JSON's types, with at least the fields above in theirs.
Report = dict[str, Any]


class ReportRejected(ValueError):
    """A message on ``pipeline_stats`` that is not a report the runner can use; the text says why, in a few
    words, never quoting the message."""


class OwnReportMalformed(RuntimeError):
    """A report signed with the run's key (so sent by one of its nodes) that does not parse: a node's bug.  Ignoring
    it would leave the run waiting for reports that never come."""


def _reject_constant(name: str) -> float:
    raise ReportRejected(f"{name} is not a number a report holds")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ReportRejected("a number out of range")
    return value


def parse_report(data: str) -> Report:
    """The checked report in ``data``, or :class:`ReportRejected`."""
    if not isinstance(data, str) or len(data) > MAX_REPORT_CHARS:
        raise ReportRejected(f"longer than {MAX_REPORT_CHARS} characters")
    try:
        report = json.loads(data, parse_constant=_reject_constant, parse_float=_finite)
    except ReportRejected:
        raise
    except (ValueError, RecursionError):  # not JSON; an integer past Python's digit limit; nested past the stack
        raise ReportRejected("not JSON") from None
    if not isinstance(report, dict):
        raise ReportRejected("not a JSON object")
    _check_values(report, 1)
    _check_fields(report)
    return report


def _check_values(value: Any, depth: int) -> None:
    """Every string printable and short, every integer within a counter's range, no deeper than MAX_DEPTH."""
    if isinstance(value, str):
        if len(value) > MAX_STRING or not value.isprintable():
            raise ReportRejected("a string that is too long or not printable")
    elif isinstance(value, bool) or value is None or isinstance(value, float):
        return
    elif isinstance(value, int):
        if abs(value) > MAX_COUNT:
            raise ReportRejected("an integer out of range")
    elif depth >= MAX_DEPTH and isinstance(value, (dict, list)):
        raise ReportRejected(f"nested deeper than {MAX_DEPTH}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_values(key, depth)
            _check_values(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_values(item, depth + 1)


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_COUNT


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _check_fields(report: Report) -> None:
    node, pid, when = report.get("node"), report.get("pid"), report.get("time")
    if not isinstance(node, str) or not _NODE_NAME.fullmatch(node):
        raise ReportRejected("no node name, or not a ROS name")
    if not (type(pid) is int and 0 < pid <= MAX_PID):
        raise ReportRejected("no pid, or not a pid")
    if not (isinstance(when, (int, float)) and not isinstance(when, bool) and when > 0):
        raise ReportRejected("no time, or not a time")
    for key in COUNTERS:
        if not _is_count(report.get(key)):
            raise ReportRejected(f"{key!r} missing or not a count")
    for key in _INTEGERS:
        if key in report and not _is_count(report[key]):
            raise ReportRejected(f"{key!r} not a count")
    for key in _OPTIONAL_SEQ:
        if report.get(key) is not None and not _is_count(report[key]):
            raise ReportRejected(f"{key!r} not a frame number")
    for key in _FLAGS:
        if key in report and type(report[key]) is not bool:
            raise ReportRejected(f"{key!r} not true or false")
    for key in _NAMES:
        if key in report and not isinstance(report[key], str):
            raise ReportRejected(f"{key!r} not a string")
    if "elapsed_s" in report and not (report["elapsed_s"] is None or _is_number(report["elapsed_s"])):
        raise ReportRejected("'elapsed_s' not a number")
    if "latency_ms_total" not in report:  # every node's report has it (the summary's latency is made of it)
        raise ReportRejected("'latency_ms_total' missing")
    for key in _LATENCIES:
        if key in report and not _is_latency(report[key]):
            raise ReportRejected(f"{key!r} not percentiles and a count")
    if "cpu" in report and not _is_cpu(report["cpu"]):
        raise ReportRejected("'cpu' not numbers")
    given = report.get("in_by_publisher", {})
    if not (isinstance(given, dict) and len(given) <= MAX_PUBLISHERS
            and all(_DECIMAL.fullmatch(pid) and _is_count(n) for pid, n in given.items())):
        raise ReportRejected("'in_by_publisher' not decimal pids and counts")


def _is_cpu(section: Any) -> bool:
    """Numbers (or null), and the steady state's split by thread: a bounded table of numbers (or null)."""
    if not isinstance(section, dict):
        return False
    split = section.get(_BY_THREAD)
    return all(v is None or _is_number(v) for k, v in section.items() if k != _BY_THREAD) and (
        split is None or (isinstance(split, dict) and len(split) <= MAX_THREAD_KINDS
        and all(_is_number(v) for v in split.values())))


def _is_latency(section: Any) -> bool:
    return isinstance(section, dict) and _is_count(section.get("n")) and all(
        section.get(key) is None or _is_number(section.get(key)) for key in ("p50", "p99"))


class ReportGate:
    """Accepts only the reports of the nodes this run started; counts the rest by why (see the module).

    ``warn`` gets one line the first time each kind of report is ignored; ``ignored`` counts them all."""

    def __init__(self, key: bytes, namespace: str, node_names: list[str], warn: Callable[[str], None]) -> None:
        self.key = key
        self.topic = f"{namespace.rstrip('/')}/pipeline_stats"
        self._prefix = namespace.rstrip("/") + "/"
        self._names = set(node_names)
        self._warn = warn
        self._newest: dict[str, tuple[int, float]] = {}  # node: (pid, time) of its last accepted report
        self.ignored: dict[str, int] = {}

    def accept(self, data: str, pid_of: Callable[[str], int | None]) -> tuple[str, Report] | None:
        """The node's name (without namespace) and the report in ``data`` if one of this run's nodes sent it now;
        ``pid_of(name)`` is the pid of the process that runs node ``name`` (None: none runs it)."""
        try:
            body = signed_body(data, self.key) if isinstance(data, str) and len(data) <= MAX_REPORT_CHARS else None
            if body is None:
                raise ReportRejected("not signed by this run (another pipeline in this namespace, or a forgery)")
            try:
                report = parse_report(body)
            except ReportRejected as why:
                raise OwnReportMalformed(f"one of this run's nodes sent a report that the runner cannot read ({why}): "
                                         "a bug in that node") from None
            name = self._name(report["node"])
            if pid_of(name) != report["pid"]:
                raise ReportRejected("from a process that does not run that node now")
            last = self._newest.get(name)
            if last is not None and last[0] == report["pid"] and report["time"] <= last[1]:
                raise ReportRejected("not newer than that node's last (a replay)")
        except ReportRejected as why:
            self._ignore(str(why))
            return None
        self._newest[name] = (report["pid"], report["time"])
        return name, report

    def _name(self, node: str) -> str:
        namespace, _, name = node.rpartition("/")
        if namespace + "/" != self._prefix or name not in self._names:
            raise ReportRejected("from a node this pipeline does not have")
        return name

    def _ignore(self, why: str) -> None:
        self.ignored[why] = self.ignored.get(why, 0) + 1
        if self.ignored[why] == 1:
            self._warn(f"ignored a message on {self.topic}: {why}; the summary's reports_ignored counts any more")
