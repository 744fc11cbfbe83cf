"""Soak: one publisher and three readers over DDS, killed and restarted at random, every frame verified.

    soak --minutes 10 [--memory auto|host|cuda] [--readers 3] [--rate 100] [--size-mib 1]
    python -m ros2_cuda_ipc_examples.bench.soak --minutes 1 --memory host
    soak --pipeline fanout|lidar --minutes 5     # a whole example pipeline instead (see pipeline_soak)

The publisher fills each block with a pattern unique to its sequence number and publishes the
descriptor at ``--rate`` Hz; each reader reads every message it gets and checks every byte.
Readers are SIGKILLed and restarted at random every few seconds, the publisher every
``--publisher-kill-every`` s (a new pool each time).  Every process's fd count and RSS are sampled
from /proc, its leases, open pools and (CUDA) device memory in use from its own reports.

Exit status 1 on any corrupt frame, a hang (a process that stops reporting or making progress),
a crash, or growth beyond noise, judged per role two ways: the median of a window after warm-up
against the median of the last window (growth across restarts), and the median over the role's
processes of each one's last sample against its first after start-up (growth within a life:
readers live seconds).  Noise is a floor per metric (DDS discovery and Python's allocator move
fd counts and RSS a little) or a fraction of the baseline, whichever is larger.  Ctrl-C ends the
run early: the table is printed, its last line says the run was interrupted (partial, no pass), exit status 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..pipelines.stacks import native_stacks
from .process_usage import process_usage

REPORT_PERIOD = 0.5  # s between a child's reports, and between the supervisor's samples
STARTUP_GRACE = 3.0  # s: samples of younger processes are start-up, not steady state
PUBLISHER_STALL = 5.0  # s without a publication from a running publisher: a hang
READER_STALL = 15.0  # s without a verified frame while a publisher has run that long: a hang
SILENCE = 10.0  # s without any report from a running process: a hang
STOP_WAIT = 10.0  # s a child has to end after SIGINT at the soak's end
READER_KILL_EVERY = (2.0, 6.0)  # s between reader kills, uniformly at random


# --- the frame pattern ---------------------------------------------------------------------------

def fill_pattern(words: np.ndarray, seq: int, ramp: np.ndarray) -> None:
    """Word 0: the sequence number; word 1: a checksum; the rest: a ramp unique to ``seq``."""
    words[0] = seq
    np.multiply(ramp, np.uint64(2 * seq + 1), out=words[2:])
    words[2:] ^= np.uint64(seq)
    words[1] = words[2:].sum(dtype=np.uint64)


def check_pattern(words: np.ndarray, ramp: np.ndarray, scratch: np.ndarray) -> str | None:
    """None when ``words`` hold exactly what :func:`fill_pattern` wrote for the sequence number in word 0."""
    seq = int(words[0])
    np.multiply(ramp, np.uint64(2 * seq + 1), out=scratch)
    scratch ^= np.uint64(seq)
    if not np.array_equal(words[2:], scratch):
        wrong = int(np.flatnonzero(words[2:] != scratch)[0]) + 2
        return f"frame {seq}: word {wrong} is {int(words[wrong])}, expected {int(scratch[wrong - 2])}"
    if int(words[1]) != int(scratch.sum(dtype=np.uint64)):
        return f"frame {seq}: checksum word is {int(words[1])}"
    return None


# --- child processes -----------------------------------------------------------------------------

def _emit(report: dict[str, Any]) -> None:
    print(json.dumps(report), flush=True)


def _qos() -> Any:
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy

    return QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE)


class _CudaDevice:
    """The GPU side of a child: a stream, host copies in and out, device memory in use."""

    def __init__(self) -> None:
        from cuda.bindings import driver
        from cuda.core import Device

        self._driver = driver
        device = Device(0)
        device.set_current()
        self.stream = device.create_stream()
        self.handle = int(self.stream.handle)

    def _check(self, result: Any, call: str) -> Any:
        if int(result[0]) != 0:
            raise RuntimeError(f"{call} failed: {result[0]!r}")
        return result[1:]

    def upload(self, device_ptr: int, host: np.ndarray) -> None:
        self._check(self._driver.cuMemcpyHtoDAsync(device_ptr, host.ctypes.data, host.nbytes, self.handle),
                    "cuMemcpyHtoDAsync")

    def download(self, host: np.ndarray, device_ptr: int) -> None:
        self._check(self._driver.cuMemcpyDtoHAsync(host.ctypes.data, device_ptr, host.nbytes, self.handle),
                    "cuMemcpyDtoHAsync")
        self._check(self._driver.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def used_mib(self) -> float:
        free, total = self._check(self._driver.cuMemGetInfo(), "cuMemGetInfo")
        return (int(total) - int(free)) / (1 << 20)


def run_publisher(args: argparse.Namespace) -> int:
    from rclpy.node import Node

    from ros2_cuda_ipc_core import BlockManager, run_nodes
    from ros2_cuda_ipc_msgs.msg import BufferCore

    words = _word_count(args.size_mib)

    class SoakPublisher(Node):
        def __init__(self) -> None:
            super().__init__("ros2_cuda_ipc_soak_publisher")
            self.pool = BlockManager(words * 8, block_count=4, memory=args.memory, reuse_delay=0.0)
            self.gpu = _CudaDevice() if self.pool.memory == "cuda" else None
            self.ramp = np.arange(words - 2, dtype=np.uint64)
            self.staging = np.empty(words, np.uint64) if self.gpu else None
            self.publisher = self.create_publisher(BufferCore, args.topic, _qos())
            self.seq = 0
            self.create_timer(1.0 / args.rate, self.publish_one)
            self.create_timer(REPORT_PERIOD, self.report)

        def publish_one(self) -> None:
            block = self.pool.acquire_for_publish()
            if block is None:
                return  # every block is leased: counted as an acquire miss
            with block:
                if self.gpu is not None and self.staging is not None:
                    fill_pattern(self.staging, self.seq, self.ramp)
                    self.gpu.upload(block.device_ptr, self.staging)
                    core = block.prepare_publish(self.gpu.stream)
                else:
                    fill_pattern(block.view((words,), np.uint64), self.seq, self.ramp)
                    core = block.prepare_publish()
            self.publisher.publish(core)
            self.seq += 1

        def report(self) -> None:
            stats = self.pool.stats()
            _emit({"memory": self.pool.memory, "published": stats["published"],
                   "acquire_misses": stats["acquire_misses"], "leases_held": stats["blocks_held_by_readers"],
                   "gpu_used_mib": self.gpu.used_mib() if self.gpu else None})

    return run_nodes(lambda: [SoakPublisher()])


def run_reader(args: argparse.Namespace) -> int:
    from rclpy.node import Node

    from ros2_cuda_ipc_core import PoolUnavailableError, Reader, StaleDescriptorError, run_nodes
    from ros2_cuda_ipc_msgs.msg import BufferCore

    words = _word_count(args.size_mib)

    class SoakReader(Node):
        def __init__(self) -> None:
            super().__init__(f"ros2_cuda_ipc_soak_reader_{args.slot}")
            self.reader = Reader()
            self.gpu: _CudaDevice | None = None
            self.ramp = np.arange(words - 2, dtype=np.uint64)
            self.scratch = np.empty(words - 2, np.uint64)
            self.host = np.empty(words, np.uint64)
            self.counts = {"verified": 0, "corrupt": 0, "stale": 0, "unavailable": 0}
            self.problems: list[str] = []
            self.create_subscription(BufferCore, args.topic, self.on_frame, _qos())
            self.create_timer(REPORT_PERIOD, self.report)

        def on_frame(self, core: Any) -> None:
            if core.memory == BufferCore.MEMORY_CUDA and self.gpu is None:
                self.gpu = _CudaDevice()
            try:
                handle = self.reader.read(core, self.gpu.stream if self.gpu else None)
            except StaleDescriptorError:
                self.counts["stale"] += 1
                return
            except PoolUnavailableError:
                self.counts["unavailable"] += 1
                return
            with handle:
                if self.gpu is not None:
                    self.gpu.download(self.host, handle.device_ptr)
                    problem = check_pattern(self.host, self.ramp, self.scratch)
                else:
                    problem = check_pattern(handle.view((words,), np.uint64), self.ramp, self.scratch)
            if problem is None:
                self.counts["verified"] += 1
                return
            self.counts["corrupt"] += 1
            self.problems = [*self.problems, problem][:5]
            self.report()  # at once: this process may be killed before its next report

        def report(self) -> None:
            stats = self.reader.stats()
            _emit({**self.counts, "problems": self.problems, "leases_held": stats["leases_held"],
                   "pools_open": stats["pools_open"], "gpu_used_mib": self.gpu.used_mib() if self.gpu else None,
                   "publishers_seen": self.count_publishers(args.topic)})

    return run_nodes(lambda: [SoakReader()])


def _word_count(size_mib: float) -> int:
    return max(4, int(size_mib * (1 << 20)) // 8)


# --- the supervisor ------------------------------------------------------------------------------

#: Growth beyond which a metric fails: (absolute floor, fraction of the baseline).
GROWTH_LIMITS = {"fds": (8.0, 0.10), "rss_mib": (32.0, 0.15), "leases_held": (1.0, 0.0),
                 "pools_open": (1.0, 0.0), "gpu_used_mib": (256.0, 0.10)}
#: Metrics of the whole device, not of the process reporting them: other processes' restarts (a CUDA
#: context each) move them during one process's life, so only the run's windows are compared.
DEVICE_WIDE = {"gpu_used_mib"}


@dataclass
class Child:
    """One process of the soak: a role, a slot, and what it last said."""

    role: str
    slot: int
    proc: subprocess.Popen
    log: TextIO
    started: float
    report: dict[str, Any] = field(default_factory=dict)
    reported_at: float = 0.0
    progress: int = 0
    progress_at: float = 0.0
    corrupt_seen: bool = False
    killed: bool = False

    @property
    def age(self) -> float:
        return time.monotonic() - self.started


@dataclass
class Totals:
    """Per role, over every process it ever ran."""

    started: int = 0
    killed: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def add(self, report: dict[str, Any], keys: tuple[str, ...]) -> None:
        for key in keys:
            self.counts[key] = self.counts.get(key, 0) + int(report.get(key) or 0)
        self.problems = [*self.problems, *report.get("problems", [])][:5]


ROLE_COUNTS = {"publisher": ("published", "acquire_misses"), "reader": ("verified", "corrupt", "stale", "unavailable")}


class Soak:
    """Starts, kills and restarts the processes, samples them, and judges the run."""

    def __init__(self, args: argparse.Namespace, out: TextIO) -> None:
        self.args = args
        self.out = out
        self.live_line = out.isatty()
        self.topic = f"ros2_cuda_ipc_soak_{os.getpid()}/frames"
        self.logs = _log_dir(args.log_dir)
        self.keep_logs = args.log_dir is not None  # a directory of the user's own is never removed
        self.stopped_by: str | None = None  # "Ctrl-C" or "SIGTERM" when the run was ended early
        self.lines: queue.SimpleQueue[tuple[Child, str]] = queue.SimpleQueue()
        self.children: list[Child] = []
        self.totals = {role: Totals() for role in ROLE_COUNTS}
        #: Per role: (seconds into the run, process id, metrics) of every process past its start-up.
        self.samples: dict[str, list[tuple[float, int, dict[str, float]]]] = {role: [] for role in ROLE_COUNTS}
        self.failures: list[str] = []
        self.memory = args.memory
        self.started = time.monotonic()
        self.random = random.Random(args.seed)

    # processes

    def spawn(self, role: str, slot: int) -> Child:
        command = [sys.executable, "-m", "ros2_cuda_ipc_examples.bench.soak", "--role", role, "--slot", str(slot),
                   "--topic", self.topic, "--memory", self.args.memory, "--rate", str(self.args.rate),
                   "--size-mib", str(self.args.size_mib)]
        log = open(self.logs / f"{role}{slot}-{self.totals[role].started}.log", "w")  # noqa: SIM115 (closed on reap)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        now = time.monotonic()
        child = Child(role, slot, proc, log, now, reported_at=now, progress_at=now)
        threading.Thread(target=self._pump, args=(child,), daemon=True).start()
        self.children.append(child)
        self.totals[role].started += 1
        return child

    def _pump(self, child: Child) -> None:
        assert child.proc.stdout is not None
        for line in child.proc.stdout:
            self.lines.put((child, line))

    def kill(self, child: Child) -> None:
        child.killed = True
        with contextlib.suppress(ProcessLookupError):
            child.proc.send_signal(signal.SIGKILL)
        child.proc.wait()
        self.reap(child)
        self.totals[child.role].killed += 1

    def reap(self, child: Child) -> None:
        self.drain()
        self.totals[child.role].add(child.report, ROLE_COUNTS[child.role])
        self.children.remove(child)
        child.log.close()

    def stop_all(self) -> None:
        """SIGINT each child, the publisher first, one after the other, each given :data:`STOP_WAIT` s to end.

        One at a time, as the pipeline runner stops its nodes: stopped all at once, every reader deletes its DDS
        participant while the others' removals reach it, the trigger of Fast DDS 3.2's deadlock in
        ``destroy_node`` (docs/decisions.md).  A child still running is killed, its threads (with C stacks where
        gdb is here) go into its log, and the failure says where it waited."""
        try:
            for child in sorted(self.children, key=lambda c: c.role != "publisher"):
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signal.SIGINT)
                try:
                    child.proc.wait(timeout=STOP_WAIT)
                except subprocess.TimeoutExpired:
                    stacks = native_stacks(child.proc.pid)
                    child.log.write(f"\n--- still running {STOP_WAIT:g} s after SIGINT ---\n{stacks}\n")
                    child.log.flush()
                    self.failures.append(f"{child.role} {child.slot} (pid {child.proc.pid}) ignored SIGINT for "
                                         f"{STOP_WAIT:g} s; its threads, in its log:\n{stacks}")
                    child.proc.kill()
                    child.proc.wait()
                self.reap(child)
        finally:  # a second Ctrl-C here, or a failure on the way: no child outlives the soak (own sessions)
            for child in self.children:
                with contextlib.suppress(ProcessLookupError):
                    child.proc.kill()

    # observation

    def drain(self) -> None:
        while True:
            try:
                child, line = self.lines.get_nowait()
            except queue.Empty:
                return
            try:
                report = json.loads(line)
            except json.JSONDecodeError:
                continue
            now = time.monotonic()
            child.report, child.reported_at = report, now
            if report.get("memory"):
                self.memory = report["memory"]
            progress = int(report.get("published" if child.role == "publisher" else "verified") or 0)
            if progress > child.progress:
                child.progress, child.progress_at = progress, now
            if int(report.get("corrupt") or 0) and not child.corrupt_seen:
                child.corrupt_seen = True
                self.failures.append(f"{child.role} {child.slot} (pid {child.proc.pid}) read corrupt frames, "
                                     f"the first: {report.get('problems')}")

    def sample(self) -> None:
        now = time.monotonic() - self.started
        for child in self.children:
            if child.age < STARTUP_GRACE or not child.report:
                continue
            usage = process_usage(child.proc.pid)
            if usage is None:
                continue
            for key in ("leases_held", "pools_open", "gpu_used_mib"):
                if child.report.get(key) is not None:
                    usage[key] = float(child.report[key])
            self.samples[child.role].append((now, child.proc.pid, usage))

    def check_health(self) -> None:
        now = time.monotonic()
        publisher_age = max((c.age for c in self.children if c.role == "publisher"), default=0.0)
        for child in list(self.children):
            name = f"{child.role} {child.slot} (pid {child.proc.pid})"
            if child.proc.poll() is not None:
                self.failures.append(f"{name} exited by itself with status {child.proc.returncode}: "
                                     f"{tail(child.log.name)}")
                self.reap(child)
                self.spawn(child.role, child.slot)
            elif now - child.reported_at > SILENCE:
                self._hang(child, f"sent no report for {SILENCE:g} s")
            elif child.role == "publisher" and child.age > PUBLISHER_STALL and now - child.progress_at > PUBLISHER_STALL:
                self._hang(child, f"published nothing for {PUBLISHER_STALL:g} s")
            elif (child.role == "reader" and min(child.age, publisher_age) > READER_STALL
                  and now - child.progress_at > READER_STALL):
                # what it said last (frames found stale, pools, the publishers DDS shows it): why it read nothing
                self._hang(child, f"verified no frame for {READER_STALL:g} s; its last report: {json.dumps(child.report)}")

    def _hang(self, child: Child, what: str) -> None:
        """A child that hangs is a failure with where its threads wait (C stacks where gdb is here); then killed
        and started again."""
        self.failures.append(f"hang: {child.role} {child.slot} (pid {child.proc.pid}) {what}\n"
                             f"{native_stacks(child.proc.pid)}")
        self.kill(child)
        self.spawn(child.role, child.slot)

    def status(self) -> str:
        elapsed = time.monotonic() - self.started
        published = self.totals["publisher"].counts.get("published", 0) + sum(
            c.progress for c in self.children if c.role == "publisher")
        verified = self.totals["reader"].counts.get("verified", 0) + sum(
            c.progress for c in self.children if c.role == "reader")
        kills = sum(t.killed for t in self.totals.values())
        usage = [process_usage(c.proc.pid) or {} for c in self.children]
        fds = sum(u.get("fds", 0) for u in usage)
        rss = sum(u.get("rss_mib", 0) for u in usage)
        return (f"{elapsed:6.0f}/{self.args.minutes * 60:.0f} s  {self.memory}  published {published}  "
                f"verified {verified}  kills {kills}  fds {fds:.0f}  rss {rss:.0f} MiB  "
                f"problems {len(self.failures)}")

    # the run

    def run(self) -> bool:
        """True when the run ended early on Ctrl-C."""
        self.spawn("publisher", 0)
        for slot in range(self.args.readers):
            self.spawn("reader", slot)
        end = self.started + self.args.minutes * 60
        next_reader_kill = time.monotonic() + self.random.uniform(*READER_KILL_EVERY)
        next_publisher_kill = time.monotonic() + self.args.publisher_kill_every
        next_status = 0.0
        try:
            while (now := time.monotonic()) < end:
                time.sleep(REPORT_PERIOD)
                self.drain()
                self.sample()
                self.check_health()
                if now >= next_reader_kill:
                    victim = self.random.choice([c for c in self.children if c.role == "reader"])
                    self.kill(victim)
                    self.spawn("reader", victim.slot)
                    next_reader_kill = now + self.random.uniform(*READER_KILL_EVERY)
                if now >= next_publisher_kill:
                    for child in [c for c in self.children if c.role == "publisher"]:
                        self.kill(child)
                        self.spawn("publisher", child.slot)
                    next_publisher_kill = now + self.args.publisher_kill_every
                if now >= next_status:
                    self._show(self.status())
                    next_status = now + (1.0 if self.live_line else 10.0)
        except KeyboardInterrupt as stop:
            from ros2_cuda_ipc_core import stop_reason

            self.stopped_by = stop_reason(stop)
            return True
        finally:
            if self.live_line:
                self.out.write("\n")
            self.stop_all()
        return False

    def _show(self, line: str) -> None:
        if self.live_line:
            self.out.write("\r" + line.ljust(120))
        else:
            self.out.write(line + "\n")
        self.out.flush()

    # judgement

    def growth(self) -> list[tuple[str, str, float, float, float, float, str]]:
        """(metric, role, baseline, end, drift, limit, verdict) per metric and role.

        ``baseline`` and ``end`` are the role's medians over a window after warm-up and over the last
        window; ``drift`` is the median over the role's processes of last minus first sample.
        """
        duration = time.monotonic() - self.started
        warmup = min(10.0, duration * 0.2)
        window = max(10.0, duration * 0.2)
        rows = []
        for role, samples in self.samples.items():
            for metric, (floor, fraction) in GROWTH_LIMITS.items():
                first = [m[metric] for t, _, m in samples if warmup <= t < warmup + window and metric in m]
                last = [m[metric] for t, _, m in samples if t >= duration - window and metric in m]
                lives: dict[int, list[float]] = {}
                for _, pid, m in samples:
                    if metric in m:
                        lives.setdefault(pid, []).append(m[metric])
                drifts = [values[-1] - values[0] for values in lives.values() if len(values) >= 2]
                if metric in DEVICE_WIDE:
                    drifts = [0.0]
                if not first or not last or not drifts:
                    continue
                baseline, end, drift = statistics.median(first), statistics.median(last), statistics.median(drifts)
                limit = max(floor, fraction * baseline)
                verdict = "GREW" if max(end - baseline, drift) > limit else "ok"
                rows.append((metric, role, baseline, end, drift, limit, verdict))
        return rows

    def report(self, interrupted: bool) -> bool:
        """Print the final table; True when the run passed."""
        out = self.out
        duration = time.monotonic() - self.started
        stopped = f" (stopped by {self.stopped_by})" if interrupted else ""
        out.write(f"\nsoak: {duration:.0f} s, {self.memory} memory, {self.args.readers} readers at "
                  f"{self.args.rate:g} Hz, {self.args.size_mib:g} MiB frames{stopped}\n")
        out.write(f"{'role':10} {'started':>8} {'killed':>7}  counts\n")
        for role, totals in self.totals.items():
            counts = "  ".join(f"{key} {value}" for key, value in totals.counts.items())
            out.write(f"{role:10} {totals.started:8} {totals.killed:7}  {counts}\n")
        out.write(f"\n{'metric':13} {'role':10} {'baseline':>9} {'end':>9} {'drift':>7} {'limit':>8}  verdict\n")
        rows = self.growth()
        for metric, role, baseline, end, drift, limit, verdict in rows:
            out.write(f"{metric:13} {role:10} {baseline:9.1f} {end:9.1f} {drift:+7.1f} {'+' + format(limit, '.1f'):>8}"
                      f"  {verdict}\n")
        failures = list(self.failures)
        failures += [f"{metric} of the {role}s grew: {baseline:.1f} after warm-up, {end:.1f} at the end, "
                     f"{drift:+.1f} over a process's life (noise limit +{limit:.1f})"
                     for metric, role, baseline, end, drift, limit, verdict in rows if verdict != "ok"]
        corrupt = self.totals["reader"].counts.get("corrupt", 0)
        if corrupt:
            failures.append(f"{corrupt} corrupt frames in all")
        if self.totals["reader"].counts.get("verified", 0) == 0:
            failures.append("no frame was verified")
        for failure in failures:
            out.write(f"FAIL: {failure}\n")
        if interrupted:  # a stop is exit status 0, as for every tool; but a partial run is no pass
            found = f"{len(failures)} problems seen so far" if failures else "no problem seen so far"
            out.write(f"soak: INTERRUPTED by {self.stopped_by} after {duration:.0f} of {self.args.minutes * 60:.0f} s: "
                      f"partial results, not a pass ({found}); logs in {self.logs}\n")
        else:
            out.write("soak: OK\n" if not failures else f"soak: FAILED ({len(failures)} problems); logs in {self.logs}\n")
        out.flush()
        return not failures


def tail(path: str, lines: int = 5) -> str:
    with contextlib.suppress(OSError), open(path) as log:
        return " | ".join(log.read().strip().splitlines()[-lines:])
    return ""


def supervise(args: argparse.Namespace) -> int:
    soak = Soak(args, sys.stdout)
    interrupted = soak.run()
    passed = soak.report(interrupted)
    if passed and not interrupted and not soak.keep_logs:
        shutil.rmtree(soak.logs, ignore_errors=True)
    return 0 if passed or interrupted else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from ros2_cuda_ipc_core import tool_parser

    parser = tool_parser(__name__, __doc__, formatter_class=_HelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to run (fractions allowed)")
    parser.add_argument("--memory", choices=["auto", "host", "cuda"], default="auto",
                        help="where the pool's blocks live (cuda is refused at once without a usable GPU)")
    parser.add_argument("--readers", type=int, default=3, help="reader processes, each killed and restarted at random")
    parser.add_argument("--rate", type=float, default=100.0, help="frames per second")
    parser.add_argument("--size-mib", type=float, default=1.0, help="frame size in MiB")
    parser.add_argument("--publisher-kill-every", type=float, default=30.0, metavar="S",
                        help="seconds between two SIGKILLs of the publisher (a new pool each time)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill schedule (None: a fresh random one)")
    parser.add_argument("--log-dir", type=Path, default=None, metavar="DIR",
                        help="keep every child's log here (None: a temporary directory, removed when the run passes)")
    # Only for --help: main() hands a command line with --pipeline to pipeline_soak before this parser sees it.
    parser.add_argument("--pipeline", metavar="fanout|lidar", default=argparse.SUPPRESS,
                        help="soak a whole example pipeline instead, its nodes killed at random; it takes its own "
                             "options (--minutes, --memory, --size, --fps, --seed, --out): soak --pipeline fanout --help")
    parser.add_argument("--role", choices=["supervisor", "publisher", "reader"], default="supervisor",
                        help=argparse.SUPPRESS)
    parser.add_argument("--slot", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--topic", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error(f"--minutes must be > 0, got {args.minutes:g}")
    if args.readers < 1:
        parser.error(f"--readers must be at least 1, got {args.readers}")
    if not 0 < args.rate <= 1000:
        parser.error(f"--rate must be in (0, 1000] Hz, got {args.rate:g}")
    if not 0 < args.size_mib <= 1024:
        parser.error(f"--size-mib must be in (0, 1024], got {args.size_mib:g}")
    if args.publisher_kill_every <= 0:
        parser.error(f"--publisher-kill-every must be > 0 s, got {args.publisher_kill_every:g}")
    if args.role == "supervisor":
        _refuse_unusable(parser, args)
    return args


def _refuse_unusable(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any process starts, what could only fail later: CUDA without a GPU, a log directory that
    cannot be written, an executor its node processes would not know (``ROS2_CUDA_IPC_EXECUTOR``)."""
    from ros2_cuda_ipc_core import executor_from_environment, refuse_unusable_memory

    refuse_unusable_memory(parser, args.memory)
    try:
        executor_from_environment()
    except ValueError as exc:
        parser.error(str(exc))
    if args.log_dir is not None:
        try:
            args.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--log-dir {args.log_dir}: {exc.strerror}")


def _log_dir(chosen: Path | None) -> Path:
    """``--log-dir`` without an earlier soak's process logs (a reused one held them beside this run's), or a new
    temporary directory.  Only the soak's own ``publisher<slot>-<n>.log`` / ``reader<slot>-<n>.log`` go."""
    if chosen is None:
        return Path(tempfile.mkdtemp(prefix="soak_logs_"))
    earlier = [path for path in chosen.glob("*.log") if _OWN_LOG.fullmatch(path.name)]
    for path in earlier:
        with contextlib.suppress(OSError):
            path.unlink()
    if earlier:
        print(f"soak: removed {len(earlier)} process logs of an earlier soak from {chosen}", flush=True)
    return chosen


_OWN_LOG = re.compile(r"(publisher|reader)[0-9]+-[0-9]+\.log")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written, and each option's default."""


ROLES: dict[str, Callable[[argparse.Namespace], int]] = {
    "supervisor": supervise, "publisher": run_publisher, "reader": run_reader}


def main(argv: list[str] | None = None) -> int:
    from ros2_cuda_ipc_core import run_tool

    given = sys.argv[1:] if argv is None else argv
    if any(arg == "--pipeline" or arg.startswith("--pipeline=") for arg in given):
        from .pipeline_soak import main as pipeline_main  # its own arguments; the readers here never import it

        return pipeline_main(given)
    args = parse_args(argv)
    return run_tool(lambda: ROLES[args.role](args))


if __name__ == "__main__":
    raise SystemExit(main())
