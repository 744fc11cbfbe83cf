"""The pipeline soak: a whole example pipeline for N minutes, a random node killed or stopped every few seconds.

    soak --pipeline fanout --minutes 5 [--memory auto|host|cuda] [--size 160x120] [--fps 8] [--seed 7]

Half the kills are SIGKILL, half SIGINT: a node stopped by SIGINT must end within the runner's stop
timeout (else its Python and C stacks are shown and the soak fails: the hang a clean stop must never
have). The runner's ``--restart always`` brings each node back (a camera comes back with a new pool).
Every second each node's process is sampled (open fds and RSS from /proc; GPU memory from
``nvidia-smi`` where there is one), and its reports give its leases held. The soak fails on any bad
frame, a hang (a running node silent for ``SILENCE`` s, or a consumer that checks nothing for
``STALL`` s while the source sends), a node that does not stop on SIGINT at the end, or growth: per
node, the median of its last samples against the median of its first ones after start-up (5 s and its
first frame taken in or sent), beyond a floor (DDS discovery and Python's allocator move these a little)
or a fraction of the start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ros2_cuda_ipc_tools import STACKS_SIGNAL

from ..pipelines.arguments import check_size, parse_size
from ..pipelines.definitions import PIPELINES, PipelineOptions
from ..pipelines.live_table import StatsTable
from ..pipelines.runner import STOP_TIMEOUT, PipelineFailed, run_pipeline, write_summary
from ..pipelines.stacks import native_stacks
from .process_usage import process_usage

__all__ = ["PipelineSoak", "SoakFailed", "main", "parse_args", "run_pipeline_soak"]

KILL_EVERY = (3.0, 7.0)  # s between kills, uniformly at random
SAMPLE_EVERY = 1.0  # s between samples of every process
STARTUP_GRACE = 5.0  # s: a younger process is starting up; its samples are not the steady state (nor before its first frame)
SILENCE = 10.0  # s without a report from a node whose process runs: a hang
STALL = 20.0  # s of a consumer's life, past start-up, with the source sending and nothing checked: a hang
WINDOW = 10  # samples in each of the windows the growth is judged between
#: Growth beyond the larger of an absolute floor and a fraction of the first window's median fails.
FLOORS = {"fds": (12.0, 0.25), "rss_mib": (40.0, 0.25), "gpu_mib": (64.0, 0.1), "leases_held": (8.0, 0.0)}


class SoakFailed(PipelineFailed):
    """A bad frame, a hang or growth: the message says which node and what."""


class _SoakOver(KeyboardInterrupt):
    """Raised by the watcher at the soak's end: the runner stops the nodes as on Ctrl-C and keeps the reports.
    (The source runs without a limit: a restarted camera would start its ``seconds`` again.)"""


@dataclass
class _Life:
    pid: int
    started: float
    samples: list[dict[str, float]] = field(default_factory=list)
    first_fds: dict[str, int] = field(default_factory=dict)  # what its fds point at: first and latest sample
    last_fds: dict[str, int] = field(default_factory=dict)


@dataclass
class PipelineSoak:
    """The runner's watcher: kills, samples and judges; :meth:`verdict` at the end."""

    rng: random.Random
    seconds: float
    kill_every: tuple[float, float] = KILL_EVERY
    over: bool = False
    kills: dict[str, int] = field(default_factory=dict)
    lives: dict[str, list[_Life]] = field(default_factory=dict)
    _next_kill: float = 0.0
    _next_sample: float = 0.0
    _ends: float = 0.0
    _stopping: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid: (node, when SIGINT was sent)
    _gpu: dict[int, float] = field(default_factory=dict)

    def __call__(self, table: StatsTable, pids: dict[str, int]) -> None:
        now = time.monotonic()
        for name, pid in pids.items():
            lives = self.lives.setdefault(name, [])
            if not lives or lives[-1].pid != pid:
                lives.append(_Life(pid, now))
        self._check_frames(table, pids, now)
        self._check_stops(now)
        if now >= self._next_sample:
            self._next_sample = now + SAMPLE_EVERY
            self._sample(table, pids, now)
        source = table.latest.get(table.order[0]) or {}
        if source.get("out"):  # frames flow: kill someone now and then, until the time is up
            if not self._next_kill:
                self._next_kill = now + self.rng.uniform(*self.kill_every)
                self._ends = now + self.seconds
            elif now >= self._ends:
                if self._settled(now):
                    self.over = True
                    raise _SoakOver
            elif now >= self._next_kill:
                self._next_kill = now + self.rng.uniform(*self.kill_every)
                self._kill(pids)

    def _settled(self, now: float) -> bool:
        """Whether the runner's final SIGINT may come: no node still stopping from our SIGINT, none younger than
        start-up (a process that has not yet installed Python's handler dies of a SIGINT, exit code -2, and a
        stopping one whose interpreter has finished has SIGINT back at its default too)."""
        return not self._stopping and all(now - lives[-1].started >= STARTUP_GRACE for lives in self.lives.values())

    def _kill(self, pids: dict[str, int]) -> None:
        name = self.rng.choice(sorted(pids))
        how = self.rng.choice((signal.SIGKILL, signal.SIGINT))
        try:
            os.kill(pids[name], how)
        except ProcessLookupError:  # died already, the runner restarts it
            return
        self.kills[name] = self.kills.get(name, 0) + 1
        if how == signal.SIGINT:
            self._stopping[pids[name]] = (name, time.monotonic())

    def _check_stops(self, now: float) -> None:
        """A node sent SIGINT must be gone within the runner's stop timeout (the runner reaps it at once)."""
        for pid, (name, sent) in list(self._stopping.items()):
            if not _alive(pid):
                del self._stopping[pid]
            elif now - sent > STOP_TIMEOUT:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, STACKS_SIGNAL)  # faulthandler writes the Python stacks to its log
                stacks = native_stacks(pid)
                raise SoakFailed(f"{name} (pid {pid}) was still running {STOP_TIMEOUT:.0f} s after SIGINT: a hang on "
                                 f"stop; its Python stacks are in its log (asked for them)\n{stacks}")

    def _check_frames(self, table: StatsTable, pids: dict[str, int], now: float) -> None:
        for name, report in table.latest.items():
            if report.get("bad"):
                raise SoakFailed(f"{name}: {report['bad']} bad frame(s)")
        for name, pid in pids.items():
            life, last = self.lives[name][-1], table.latest.get(name)
            if last is None or last["pid"] != pid or now - life.started < STARTUP_GRACE + SILENCE:
                continue
            if time.time() - last["time"] > SILENCE and _alive(pid):
                raise SoakFailed(f"{name} (pid {pid}) has not reported for {SILENCE:.0f} s while running: a hang")

    def _sample(self, table: StatsTable, pids: dict[str, int], now: float) -> None:
        if any(_uses_gpu(report) for report in table.latest.values()):
            self._gpu = gpu_memory_by_pid()
        for name, pid in pids.items():
            life = self.lives[name][-1]
            usage = process_usage(pid)
            if usage is None or now - life.started < STARTUP_GRACE:
                continue
            self._check_stall(name, life, table, now)  # before the frame test below: a node never given one is a stall
            report = table.latest.get(name) or {}
            if not _handled_a_frame(report, pid):
                continue
            if "leases_held" in report:
                usage["leases_held"] = float(report["leases_held"])
            if pid in self._gpu:
                usage["gpu_mib"] = self._gpu[pid]
            life.last_fds = fd_kinds(pid)
            if len(life.samples) < WINDOW:  # the window growth() takes its first median over
                life.first_fds = life.last_fds
            life.samples.append(usage)

    def _check_stall(self, name: str, life: _Life, table: StatsTable, now: float) -> None:
        report, source = table.latest.get(name) or {}, table.latest.get(table.order[0]) or {}
        if report.get("source") or source.get("done") or report.get("pid") != life.pid:
            return
        if now - life.started > STARTUP_GRACE + STALL and report.get("checked_this_life", 0) == 0:
            raise SoakFailed(f"{name} (pid {life.pid}) checked no frame in {now - life.started:.0f} s of its life "
                             "while the source sent: a hang")

    def growth(self) -> list[tuple[str, str, float, float, bool]]:
        """(node, metric, first, last, ok) per node and metric: all of a node's lives' samples, in order."""
        rows = []
        for name, lives in sorted(self.lives.items()):
            samples = [sample for life in lives for sample in life.samples]
            for metric, (floor, fraction) in FLOORS.items():
                values = [sample[metric] for sample in samples if metric in sample]
                if len(values) < 2 * WINDOW:
                    continue
                first, last = statistics.median(values[:WINDOW]), statistics.median(values[-WINDOW:])
                rows.append((name, metric, first, last, last - first <= max(floor, fraction * first)))
        return rows


def _handled_a_frame(report: dict[str, Any], pid: int) -> bool:
    """Whether the life ``pid`` of a node has reported a frame taken in or sent.  What a node makes at its first
    frame (a CUDA context, the pool it sends from) is start-up, not growth: a first window sampled before it made
    preprocess's fds grow 53 -> 74 on the H100, every later sample the same."""
    counts = report.get("counts_this_life") or {}
    return report.get("pid") == pid and (counts.get("in", 0) > 0 or counts.get("out", 0) > 0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _uses_gpu(report: dict[str, Any]) -> bool:
    return report.get("memory") == "cuda"


def gpu_memory_by_pid() -> dict[int, float]:
    """MiB of GPU memory each process uses, from ``nvidia-smi``; empty where there is none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    try:
        out = subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except subprocess.TimeoutExpired:
        return {}
    usage = {}
    for line in out.splitlines():
        pid, _, mib = line.partition(",")
        if pid.strip().isdigit() and mib.strip().isdigit():
            usage[int(pid)] = float(mib)
    return usage


def parse_args(argv: list[str]) -> argparse.Namespace:
    from ros2_cuda_ipc_core import tool_parser

    parser = tool_parser(__name__, __doc__, prog="soak")  # the usage line names --pipeline itself
    parser.add_argument("--pipeline", choices=sorted(PIPELINES), required=True, help="which example pipeline")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to run (fractions allowed)")
    parser.add_argument("--memory", choices=["auto", "host", "cuda"], default="auto")
    parser.add_argument("--size", type=parse_size, default=(160, 120), metavar="SIZE",
                        help="frame size (a lidar: columns x rings) (default: 160x120)")
    parser.add_argument("--fps", type=float, default=8.0, help="frames per second (default: 8)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill schedule")
    parser.add_argument("--out", type=Path, default=Path("soak-output"),
                        help="where the summary and node logs go (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error(f"--minutes must be > 0, got {args.minutes:g}")
    if not 0 < args.fps <= 1000:
        parser.error(f"--fps must be in (0, 1000], got {args.fps:g}")
    check_size(parser, args.size, args.pipeline)
    return args


def main(argv: list[str]) -> int:
    """``soak --pipeline ...``: Ctrl-C and SIGTERM end it with status 0."""
    from ros2_cuda_ipc_core import run_tool

    args = parse_args(argv)
    return run_tool(lambda: run_pipeline_soak(args))


def run_pipeline_soak(args: argparse.Namespace) -> int:
    """The ``soak --pipeline`` command: 0 when no bad frame, hang or growth was seen (or on Ctrl-C)."""
    from ..nodes.arrays import choose_memory

    memory, why = choose_memory(args.memory)
    width, height = args.size
    options = PipelineOptions(width, height, args.fps, memory, 0, 0.0, f"/soak_{args.pipeline}", args.out, block_count=8)
    pipeline = PIPELINES[args.pipeline](options)
    soak = PipelineSoak(random.Random(args.seed), args.minutes * 60.0)
    print(f"soak: {args.pipeline} pipeline, {width}x{height} at {args.fps:g} fps, {memory} memory ({why}), "
          f"{args.minutes:g} min, a random node killed every {KILL_EVERY[0]:g}-{KILL_EVERY[1]:g} s", flush=True)
    started = time.monotonic()
    try:
        summary = run_pipeline(pipeline, options, stream=None, restart="always", watcher=soak)
    except PipelineFailed as exc:
        print(f"soak: FAIL: {exc}")
        if exc.summary is not None:
            write_summary({**exc.summary, "soak": _soak_summary(soak, exc.reason)}, args.out)
        _print_growth(soak)
        return 1
    _print_growth(soak)
    checked = ", ".join(f"{name} {count}" for name, count in summary["frames_checked"].items())
    print(f"soak: {summary['frames_published']} frames published; checked: {checked}; kills: "
          f"{', '.join(f'{name} {count}' for name, count in sorted(soak.kills.items())) or 'none'}; "
          f"restarts: {sum(summary['restarts'].values())}")
    verdict = _verdict(soak, summary)
    write_summary({**summary, "soak": _soak_summary(soak, verdict)}, args.out)
    if verdict == "interrupted":  # a stop is exit status 0, as for every tool; but a partial run is no pass
        print(f"soak: INTERRUPTED after {time.monotonic() - started:.0f} of {args.minutes * 60:.0f} s: partial "
              f"results, not a pass; summary and node logs in {args.out}")
        return 0
    print(f"soak: {verdict}")
    return 0 if verdict == "OK" else 1


def _verdict(soak: PipelineSoak, summary: dict[str, Any]) -> str:
    """'OK', 'interrupted' (stopped before its time was up), or 'FAIL: ' and why."""
    if summary["interrupted"] and not soak.over:
        return "interrupted"
    hung = {name: code for name, code in summary["exit_codes"].items() if code != 0}
    if hung:
        return f"FAIL: did not end on SIGINT within the runner's stop timeout (exit codes): {hung}"
    failures = [row for row in soak.growth() if not row[4]]
    if not summary["ok"] or failures:
        grown = ", ".join(f"{name} {metric}" for name, metric, *_ in failures)
        return f"FAIL: {'growth in ' + grown if failures else 'a consumer checked nothing'}"
    return "OK"


def _soak_summary(soak: PipelineSoak, verdict: str) -> dict[str, Any]:
    """What the soak adds to the runner's summary: its verdict, kills and growth table."""
    return {"verdict": verdict, "kills": dict(soak.kills),
            "growth": [{"node": name, "metric": metric, "first": first, "last": last, "ok": ok}
                       for name, metric, first, last, ok in soak.growth()]}


def _print_growth(soak: PipelineSoak) -> None:
    for name, metric, first, last, ok in soak.growth():
        print(f"{metric:<12} {name:<11} first {first:9.1f}  last {last:9.1f}  {'ok' if ok else 'GROWTH'}")
        lives = soak.lives.get(name, [])
        if metric == "fds" and not ok and lives:
            before, after = lives[0].first_fds, lives[-1].last_fds
            changed = {kind: after.get(kind, 0) - before.get(kind, 0) for kind in sorted({*before, *after})}
            print(f"             {name}'s fds, first life's first sample to last life's last: "
                  + ", ".join(f"{kind} {n:+d}" for kind, n in changed.items() if n))


def fd_kinds(pid: int) -> dict[str, int]:
    """What a live process's fds point at, counted by kind (a path without its digits, 'socket', ...)."""
    kinds: dict[str, int] = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return kinds
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        kind = re.sub(r"[0-9a-f]{8,}|\d+", "N", target.split(":[")[0] if ":[" in target else target)
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds

