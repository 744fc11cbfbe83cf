"""Frames between two ROS 2 processes: ros2_cuda_ipc (CUDA and host memory) against sensor_msgs/Image over DDS.

    benchmark [--mode latency|throughput|both] [--payloads 640x480 1920x1080 3840x2160] [--rates 30 100] [--out DIR]
    python -m ros2_cuda_ipc_examples.bench.benchmark ...          (the same)

This process publishes, a consumer process it starts subscribes; one run measures every transport,
payload and rate back to back:
  cuda         ros2_cuda_ipc, frames in GPU memory: the consumer gets the producer's block on its own stream
  host         ros2_cuda_ipc, frames in host memory (memfd)
  sensor_msgs  the same frame as sensor_msgs/Image over DDS; on a GPU the producer downloads it
               and the consumer uploads it, as a GPU pipeline must; without a GPU, host to host
  fallback     ros2_cuda_ipc's CPU twin: the frame is published into a pool, and the consumer reads the
               sensor_msgs/Image the publisher's twin makes of it, as rviz2 or a subscriber on
               another host would (a frame offered while the twin still converts one is dropped)
  floor        the same GpuImage message with no frame behind it: what DDS alone costs
Every consumer does the same work where the data lives: it sums the frame's 64-bit words (every byte
touched; the sum also proves the frame is this frame), with torch or cupy on its own stream on a GPU,
numpy on the host.
Modes: latency: paced at each --rates, idle between frames; publish → consumer-ready p50/p90/p99/max,
and the consumer's time split into arrival, read, view (__dlpack__), wait, work and release.
throughput: as fast as the consumer acknowledges (--in-flight frames ahead at most): verified FPS, drops.
Writes results.json, results.md and (with matplotlib) latency_cdf.png and fps.png under --out.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ros2_cuda_ipc_core import DEFAULT_REUSE_DELAY, bounded_number, stop_reason, tool_parser

from . import plots, results
from .arrays import GPU_LIBRARIES, installed_gpu_libraries
from .cases import DEFAULT_TRANSPORTS, MODES, TRANSPORTS, Case, Plan, make_plan
from .consumer import DRAIN_S
from .payloads import Payload, default_payloads, parse_payload
from .whole_files import write_whole

CONSUMER_START_TIMEOUT_S = 60.0


class ConsumerFailed(RuntimeError):
    """The consumer process ended before the run did."""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every option's default."""


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(__name__, __doc__, prog="benchmark", formatter_class=_HelpFormatter)
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both", help="what to measure")
    parser.add_argument("--memory", choices=["auto", "cuda", "host"], default="auto",
                        help="where frames live: auto = the GPU when one is usable (and torch or cupy is installed), "
                             "else host memory, saying why")
    parser.add_argument("--transports", nargs="+", choices=TRANSPORTS, default=list(DEFAULT_TRANSPORTS),
                        help="transports to run (the -direct ones: a typed subscription with delivery=\"direct\"; "
                             "the -subscription ones: a typed subscription in the executor; both asked for by name); "
                             "cuda ones are skipped (with one line) when frames live in host memory")
    parser.add_argument("--payloads", nargs="+", type=parse_payload, default=default_payloads(),
                        help="rgba8 images as WIDTHxHEIGHT, and 'ouster' (a 128 x 1024 cloud of 48-byte points; "
                             "needs ros2_cuda_ipc_pointcloud)")
    parser.add_argument("--rates", nargs="+", type=bounded_number(float, 0.1, 10000), default=[30.0],
                        help="latency mode: frames per second, one pass per rate")
    parser.add_argument("--frames", type=bounded_number(int, 1, 1_000_000), default=300,
                        help="measured frames per case (transport x payload x rate)")
    parser.add_argument("--warmup", type=bounded_number(int, 0, 10_000), default=5,
                        help="frames sent first in each case and not measured (pool import, first-use costs)")
    parser.add_argument("--blocks", type=bounded_number(int, 2, 64), default=4, help="blocks per ros2_cuda_ipc pool")
    parser.add_argument("--reuse-delay", type=bounded_number(float, 0, 1), default=DEFAULT_REUSE_DELAY, metavar="SECONDS",
                        help="a published block is reused only this long after: a pool of N blocks publishes at "
                             "most N / SECONDS frames a second (0: as soon as the consumer lets go)")
    parser.add_argument("--in-flight", type=bounded_number(int, 1, 63), default=2,
                        help="throughput mode: frames sent and not yet acknowledged by the consumer, at most")
    parser.add_argument("--case-seconds", type=bounded_number(float, 1, 3600), default=15.0,
                        help="throughput mode: a case stops sending after this long (a stalling transport cannot "
                             "stretch the run)")
    parser.add_argument("--gpu-library", choices=["auto", *GPU_LIBRARIES], default="auto",
                        help="who touches GPU frames in both processes: auto = torch if installed, else cupy")
    parser.add_argument("--consumer-device", type=bounded_number(int, 0, 63), default=0, metavar="GPU",
                        help="CUDA device of the consumer's streams; another than the pools' (0) times a cross-device "
                             "read: a peer mapping where the GPUs reach each other, else one copy")
    parser.add_argument("--executor", choices=["single", "events"], default="single",
                        help="the consumer's executor: rclpy's SingleThreadedExecutor, or its C++ EventsExecutor "
                             "(where this rclpy has one)")
    parser.add_argument("--out", type=Path, default=Path("benchmark-results"), help="directory for the outputs")
    return parser


def gpu_unavailable_reason() -> str | None:
    """None when a CUDA pool can be made here, else why not (one line)."""
    from ros2_cuda_ipc_core import BlockManager, CudaUnavailableError

    try:
        with BlockManager(1, block_count=1, memory="cuda"):
            return None
    except CudaUnavailableError as exc:
        return str(exc)


def resolve_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Plan, list[str]]:
    """Check the arguments together and against this machine; the plan, and the notes to print (one line each)."""
    if args.in_flight >= args.blocks:
        parser.error(f"--in-flight {args.in_flight} must be below --blocks {args.blocks}: the producer needs a free block")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} exists and is not a directory")
    if args.executor != "single":
        from ros2_cuda_ipc_core import executor_factory

        try:
            executor_factory(args.executor)
        except ValueError as exc:
            parser.error(str(exc))
    notes: list[str] = []
    transports = list(dict.fromkeys(args.transports))
    memory, library = "host", None
    if args.memory != "host":  # auto or cuda: frames live on the GPU when one is usable here
        reason = gpu_unavailable_reason()
        installed = [name for name in installed_gpu_libraries() if args.gpu_library in ("auto", name)]
        if reason is None and not installed:
            wanted = "torch or cupy" if args.gpu_library == "auto" else args.gpu_library
            reason = f"a GPU is here, but the on-device reduction needs {wanted}, which is not installed"
        if reason is None:
            memory, library = "cuda", installed[0]
        elif args.memory == "cuda":
            parser.error(f"--memory cuda: {reason}")
        else:
            skipped = "cuda rows skipped, " if any(name.startswith("cuda") for name in transports) else ""
            notes.append(f"benchmark: no GPU run ({reason}): {skipped}sensor_msgs runs host to host")
    if args.consumer_device:
        if memory != "cuda":
            parser.error(f"--consumer-device {args.consumer_device}: needs frames in CUDA memory, and they are on the host")
        from ros2_cuda_ipc_core import cuda_device_count

        if args.consumer_device >= cuda_device_count():
            parser.error(f"--consumer-device {args.consumer_device}: this machine has {cuda_device_count()} CUDA device(s)")
    on_gpu = [name for name in transports if name.startswith("cuda")]
    if memory == "host" and on_gpu:
        if args.memory == "host":
            notes.append("benchmark: --memory host: cuda rows skipped")
        transports = [name for name in transports if name not in on_gpu]
    if not transports:
        parser.error("no transport left to run on this machine")
    modes = list(MODES) if args.mode == "both" else [args.mode]
    payloads: list[Payload] = list(dict.fromkeys(  # argparse does not convert a list default
        p if isinstance(p, Payload) else parse_payload(p) for p in args.payloads))
    plan = make_plan(modes, transports, payloads, list(dict.fromkeys(args.rates)), args.frames, args.warmup,
                     memory, library, args.blocks, args.reuse_delay, args.in_flight, args.case_seconds,
                     args.consumer_device, args.executor)
    return plan, notes


class Progress:
    """One live line on a terminal; one line per finished case otherwise (logs, CI)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.live = sys.stdout.isatty()
        self._width = 0

    def _write(self, text: str, end: str) -> None:
        pad = max(0, self._width - len(text)) if self.live else 0
        sys.stdout.write(("\r" if self.live else "") + text + " " * pad + end)
        sys.stdout.flush()
        self._width = 0 if end else len(text)

    def frame(self, case: Case, seq: int) -> None:
        if self.live:
            self._write(f"[{case.index + 1}/{self.total}] {case.title}: frame {seq}/{case.total_frames}", "")

    def finished(self, case: Case, result: dict[str, Any]) -> None:
        if case.rate is None:
            outcome = f"{result['fps']:,.1f} FPS"
        elif "ready" in result["stats_us"]:
            ready = result["stats_us"]["ready"]
            outcome = f"ready p50 {ready['p50']:,.0f} us, p99 {ready['p99']:,.0f} us"
        else:
            outcome = "no frame arrived"
        problems = results.problems(result)  # what the "Frames not verified" notes say of it too
        self._write(f"[{case.index + 1}/{self.total}] {case.title}: {outcome}, "
                    f"{result['verified']}/{result['measured_sent']} sent verified" + (f" ({problems})" if problems else ""),
                    "\n")


class ConsumerProcess:
    """The consumer, started with the plan; its stderr is kept so that its failure can be shown at once."""

    def __init__(self, plan: Plan) -> None:
        command = [sys.executable, "-m", "ros2_cuda_ipc_examples.bench.consumer", json.dumps(plan.to_json())]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._reader = threading.Thread(target=self._keep_stderr, daemon=True)
        self._reader.start()

    def _keep_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.rstrip())

    def check(self) -> None:
        code = self.process.poll()
        if code is not None:
            self._reader.join(timeout=1.0)
            raise ConsumerFailed(f"the consumer process (pid {self.process.pid}) exited with code {code}"
                                 + (":\n  " + "\n  ".join(self.stderr) if self.stderr else " and printed nothing"))

    def stop(self, timeout: float) -> None:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait(timeout=5)


def run(args: argparse.Namespace, plan: Plan, notes: list[str], outcome: dict[str, Any] | None = None) -> int:
    import rclpy

    from ..bench.producer import Producer

    for note in notes:
        print(note, flush=True)
    paced = sum(case.total_frames / case.rate for case in plan.cases if case.rate)
    capped = plan.case_seconds * sum(case.rate is None for case in plan.cases)
    transports = list(dict.fromkeys(case.transport for case in plan.cases))
    print(f"benchmark: {len(plan.cases)} cases ({', '.join(transports)}; frames in {plan.memory} memory"
          f"{f', {plan.gpu_library} on the GPU' if plan.gpu_library else ''}); paced cases take {paced:.0f} s, "
          f"throughput cases at most {capped:.0f} s; "
          f"outputs in {args.out}/", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    run_record = new_run_record(args, plan, notes)
    consumer: ConsumerProcess | None = None
    node = producer = None
    try:  # a stop from here on is said, and what ran written
        consumer = ConsumerProcess(plan)
        rclpy.init()
        node = rclpy.create_node("ros2_cuda_ipc_benchmark_producer")
        producer = Producer(node, plan, consumer.check)
        if not producer.wait_for_consumer(CONSUMER_START_TIMEOUT_S):
            raise ConsumerFailed(f"the consumer did not discover this process's publishers within "
                                 f"{CONSUMER_START_TIMEOUT_S:g} s (is ROS_DOMAIN_ID or ROS_LOCALHOST_ONLY set differently?)")
        progress = Progress(len(plan.cases))
        for case in plan.cases:
            sent = producer.run_case(case, functools.partial(progress.frame, case))
            report = producer.finish_case(case, sent, timeout=DRAIN_S + 30)
            result = results.case_result(case, sent, report)
            run_record["results"].append(result)
            progress.finished(case, result)
        producer.quit()
        consumer.stop(timeout=10)
    except ConsumerFailed as exc:
        print(f"\nbenchmark: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: what ran is written, marked partial, beside a full run's
        mark_partial(run_record, stop, len(plan.cases), outcome)
        raise
    finally:
        if producer is not None:
            producer.close()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        if consumer is not None and consumer.process.poll() is None:
            consumer.process.terminate()
            consumer.process.wait(timeout=5)
        if run_record["results"]:
            try:
                write_outputs(args.out, run_record, "results-partial" if run_record.get("partial") else "results")
            except KeyboardInterrupt as stop:  # while plotting a whole run: every case ran, the plots did not all
                if outcome is not None and not outcome:
                    outcome.update(stopped_by=stop_reason(stop), cases_done=len(run_record["results"]),
                                   cases_planned=len(plan.cases), plotting=True)
                raise
    return 0 if all(result["bad"] == 0 for result in run_record["results"]) else 1


def new_run_record(args: argparse.Namespace, plan: Plan, notes: list[str]) -> dict[str, Any]:
    """What results.json holds besides the results: the command, its settings, the machine."""
    settings = {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()}
    settings.update(payloads=[payload.name for payload in plan.payloads], memory_used=plan.memory,
                    gpu_library_used=plan.gpu_library, notes=notes)
    return {"command": ["benchmark", *sys.argv[1:]], "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "settings": settings, "machine": results.machine(plan.gpu_library), "results": []}


def mark_partial(run_record: dict[str, Any], stop: BaseException, planned: int, outcome: dict[str, Any] | None) -> None:
    """Mark a run stopped before its last case: its files say so, and are not a full run's."""
    run_record["partial"] = {"stopped_by": stop_reason(stop), "cases_done": len(run_record["results"]),
                             "cases_planned": planned}
    if outcome is not None:
        outcome.update(run_record["partial"])


def write_outputs(out: Path, run_record: dict[str, Any], stem: str = "results") -> None:
    """``stem``.json, ``stem``.md and the plots; prints the tables and what was written."""
    run_record["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results.write_json(out / f"{stem}.json", run_record)
    table = results.markdown(run_record)
    write_whole(out / f"{stem}.md", table + "\n")
    print("\n" + table, flush=True)
    written = [out / f"{stem}.json", out / f"{stem}.md"]
    missing = plots.matplotlib_missing()
    try:
        if stem != "results":
            print("benchmark: no plots for a partial run (they would replace a full run's)", flush=True)
        elif missing:
            print(f"benchmark: {missing}", flush=True)
        else:
            print("benchmark: drawing the plots", flush=True)
            for path in plots.draw(run_record["results"], out):
                written.append(path)
    except KeyboardInterrupt:  # a stop while plotting: what was written is said, then the stop goes on
        print("benchmark: plotting interrupted: the plots not listed below were not drawn", flush=True)
        raise
    finally:
        print("benchmark: wrote " + ", ".join(str(path) for path in written), flush=True)


def main(argv: list[str] | None = None) -> None:
    from ros2_cuda_ipc_core import run_tool

    parser = build_parser()
    args = parser.parse_args(argv)
    plan, notes = resolve_plan(parser, args)
    started = time.monotonic()
    outcome: dict[str, Any] = {}
    code = run_tool(lambda: run(args, plan, notes, outcome))
    took = time.monotonic() - started
    if outcome.get("plotting"):
        print(f"benchmark: interrupted by {outcome['stopped_by']} while plotting, after all {outcome['cases_done']} "
              f"cases in {took:.0f} s (results.json and results.md written; plots only as listed above)", flush=True)
    elif outcome:
        written = "written as results-partial.*" if outcome["cases_done"] else "nothing written: no case had ended"
        print(f"benchmark: interrupted by {outcome['stopped_by']} after {outcome['cases_done']} of "
              f"{outcome['cases_planned']} cases in {took:.0f} s ({written})", flush=True)
    else:
        print(f"benchmark: done in {took:.0f} s", flush=True)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
