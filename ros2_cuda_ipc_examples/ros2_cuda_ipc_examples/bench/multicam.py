"""The multi-camera case: N cameras, each read by M encoders, through ros2_cuda_ipc and through sensor_msgs/Image.

    benchmark_multicam [--cameras 4] [--readers 3] [--size 1080p] [--fps 30] [--seconds 20] [--memory auto]
    python -m ros2_cuda_ipc_examples.bench.multicam --size 640x480 --seconds 10 --memory host

The question users ask of a zero-copy transport is CPU for many cameras (NITROS's "8 cameras at
20 fps: 70% to 20% CPU"). Each configuration runs the ``multicam`` pipeline, every node its own
process (``--compose``: one), and reads every node's own CPU counters and latency from the
camera's stamp in the steady state (after each node's warm-up frames). Per transport it prints the
CPU of a camera and of a reader per frame, the whole pipeline's CPU as cores, the readers' latency
p50 / p99 and the frames checked; ``multicam.json`` under ``--out`` keeps the pipeline summaries.
Ctrl-C or SIGTERM ends it within a second: the transport that runs is cut (its nodes killed), no other
starts, and ``multicam.json`` says so (``partial``: which transports completed, which was cut, which never ran).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ros2_cuda_ipc_core import run_tool, stop_reason, tool_parser

from ..pipelines.arguments import add_pipeline_arguments, pipeline_options, positive_number
from ..pipelines.definitions import PipelineOptions, multicam
from ..pipelines.runner import PipelineFailed, run_pipeline
from . import plots
from .quick_stop import QuickStop
from .whole_files import write_whole

__all__ = ["TRANSPORTS", "main", "multicam_row", "print_rows"]

#: The ways a frame can go from a camera to its readers (the ``transport`` parameter of both ends), and their labels.
TRANSPORTS = {"ipc": "ros2_cuda_ipc", "ipc-direct": "ros2_cuda_ipc (direct)", "sensor_msgs": "sensor_msgs/Image"}


def multicam_row(summary: dict[str, Any], fps: float) -> dict[str, Any]:
    """One transport's figures from its pipeline summary: per-frame CPU of a camera and of a reader (median
    over them), the pipeline's CPU in cores (each process once), readers' steady latency, frames checked."""
    nodes = {name: report for name, report in summary["nodes"].items() if report}
    def steady_cpu(name: str) -> float | None:
        return (nodes[name].get("cpu") or {}).get("cpu_ms_per_frame_steady")

    cameras = [steady_cpu(name) for name, report in nodes.items() if report.get("source")]
    readers = [steady_cpu(name) for name, report in nodes.items() if not report.get("source")]
    reader_threads = [(report.get("cpu") or {}).get("cpu_ms_per_frame_steady_by_thread") or {}
                      for report in nodes.values() if not report.get("source")]
    one_per_process = {report["pid"]: name for name, report in nodes.items()}
    per_process = [steady_cpu(name) for name in one_per_process.values()]
    latency = [report.get("latency_ms_steady") or {} for report in nodes.values() if not report.get("source")]
    p50s = [entry["p50"] for entry in latency if entry.get("n")]
    p99s = [entry["p99"] for entry in latency if entry.get("n")]
    return {
        "camera_cpu_ms_per_frame": _median(cameras), "reader_cpu_ms_per_frame": _median(readers),
        "reader_cpu_ms_per_frame_by_thread": _median_by_kind(reader_threads),
        "cores": round(sum(value for value in per_process if value is not None) * fps / 1000, 3)
        if all(value is not None for value in per_process) else None,
        "processes": len(one_per_process),
        "latency_p50_ms": _median(p50s), "latency_p99_ms": max(p99s) if p99s else None,
        "frames_published": sum(report.get("out", 0) for report in nodes.values() if report.get("source")),
        "frames_checked": sum(summary["frames_checked"].values()),
        "bad": sum(report.get("bad", 0) for report in nodes.values()), "ok": summary["ok"],
        "cut_by": summary.get("cut_by"),  # a run stopped before its end: its counts are not a whole run's
    }


def _median(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return round(statistics.median(known), 3) if known else None


def _median_by_kind(splits: list[dict[str, float]]) -> dict[str, float]:
    """Each thread kind's median over the nodes' splits (0 where a node has none of it), largest first."""
    kinds = {kind for split in splits for kind in split}
    medians = {kind: _median([split.get(kind, 0.0) for split in splits]) or 0.0 for kind in kinds}
    return dict(sorted(medians.items(), key=lambda item: -item[1]))


def _cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = tool_parser(__name__, __doc__, prog="benchmark_multicam")
    parser.add_argument("--cameras", type=positive_number(int), default=4, help="cameras (default: %(default)s)")
    parser.add_argument("--readers", type=positive_number(int), default=3,
                        help="encoders reading each camera (default: %(default)s)")
    parser.add_argument("--seconds", type=positive_number(float), default=20.0,
                        help="each transport's run (default: %(default)s)")
    parser.add_argument("--transports", nargs="+", choices=sorted(TRANSPORTS), default=list(TRANSPORTS),
                        help=f"which, in turn (default: {' '.join(TRANSPORTS)}); sensor_msgs frames are uploaded "
                             "to --memory")
    add_pipeline_arguments(parser, ["multicam"], Path("multicam-output"),
                           "where multicam.json and each transport's node logs go")
    args = parser.parse_args(argv)
    base, why = pipeline_options(parser, args, "multicam")
    base = replace(base, seconds=args.seconds)
    mode = ("composed" if args.compose else "separate processes") + \
        ("" if args.executor == "single" else f", {args.executor} executor") + \
        ("" if args.cuda_wait == "auto" else f", CUDA wait {args.cuda_wait}")
    stop = QuickStop()
    with stop.armed():  # until multicam.json is written: a stop there is noted, and the plot not drawn
        summaries: dict[str, dict[str, Any]] = {}
        try:
            print(f"multicam: {args.cameras} cameras x {args.readers} readers, {base.width}x{base.height} at "
                  f"{base.fps:g} fps, {base.memory} memory ({why}), {mode}, {args.seconds:g} s a transport", flush=True)
            run_transports(args, base, stop, summaries)
        except PipelineFailed:
            return 1
        except KeyboardInterrupt:  # the first stop, before the runner started a transport's nodes: nothing to cut
            pass
        rows = {transport: multicam_row(summary, base.fps) for transport, summary in summaries.items()}
        print_rows(rows)
        record: dict[str, Any] = {"rows": rows, "executor": args.executor, "cuda_wait": args.cuda_wait,
                                  "compose": args.compose,
                                  "summaries": summaries}
        if stop.by is not None:
            record["partial"] = partial_record(stop.by, list(dict.fromkeys(args.transports)), summaries)
        path = base.out_dir / "multicam.json"
        write_whole(path, json.dumps(record, indent=1) + "\n")
    if "partial" in record:
        print(f"multicam: interrupted by {stop.by}: {partial_text(record['partial'])}; wrote {path} "
              "(marked partial; no plot)", flush=True)
        return 0
    print(f"multicam: wrote {path}", flush=True)
    if stop.by is not None:  # after the last transport: its figures are whole
        print(f"multicam: interrupted by {stop.by} before plotting: no plot", flush=True)
        return 0
    if plots.matplotlib_missing() is None:
        title = (f"{args.cameras} cameras x {args.readers} readers, {base.width}x{base.height} at {base.fps:g} fps, "
                 f"{base.memory} memory")
        try:
            print(f"multicam: wrote {plots.draw_multicam(rows, TRANSPORTS, title, base.out_dir)}", flush=True)
        except KeyboardInterrupt as stopped:
            print(f"multicam: interrupted by {stop_reason(stopped)} while plotting: no plot (the table and {path} "
                  "are whole)", flush=True)
            return 0
    return 0 if all(row["ok"] for row in rows.values()) else 1


def run_transports(args: argparse.Namespace, base: PipelineOptions, stop: QuickStop,
                   summaries: dict[str, dict[str, Any]]) -> None:
    """Each transport's pipeline in turn, its summary into ``summaries``, until the last or a stop, which cuts the
    one that runs (its summary has ``cut_by``) and starts no other."""
    for transport in dict.fromkeys(args.transports):
        try:
            stop.new_pipeline()
            options = replace(base, namespace=f"{base.namespace}_{transport.replace('-', '_')}",
                              out_dir=base.out_dir / transport)
            summary = run_pipeline(multicam(options, transport, args.cameras, args.readers), options,
                                   compose=args.compose, executor=args.executor, stream=None,
                                   watcher=stop.watcher)
        except PipelineFailed as exc:
            if not stop.stopped():
                print(f"multicam: {TRANSPORTS[transport]}: FAILED: {exc}", file=sys.stderr)
                raise
            if exc.summary is None or "nodes" not in exc.summary:  # no summary made: nothing to keep of it
                break
            summary = {**exc.summary, "failure": None, "interrupted": True}  # its nodes killed by the stop
        summaries[transport] = summary
        if summary["interrupted"]:
            summary["cut_by"] = stop.by = stop.by or "Ctrl-C"
        if stop.stopped():  # cut, or a stop as its nodes were stopped after their run (the runner took that one)
            return


def partial_record(stopped_by: str, planned: list[str], summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What multicam.json says of a stopped run: which transports ran to their end, which was cut, which never ran."""
    cut = [name for name, summary in summaries.items() if summary.get("cut_by")]
    return {"stopped_by": stopped_by, "completed": [name for name in summaries if name not in cut], "cut": cut,
            "skipped": [name for name in planned if name not in summaries]}


def partial_text(partial: dict[str, Any]) -> str:
    """The partial record in words, transports by their labels."""
    def names(key: str) -> str:
        return ", ".join(TRANSPORTS[name] for name in partial[key]) or "none"

    return f"completed: {names('completed')}; cut short: {names('cut')}; not run: {names('skipped')}"


def print_rows(rows: dict[str, dict[str, Any]]) -> None:
    """The table: a row per transport, from :func:`multicam_row`."""
    print(f"  {'transport':<22} {'camera ms/f':>11} {'reader ms/f':>11} {'cores':>6} {'procs':>5} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'checked':>8} {'bad':>4}   (CPU and latency: steady state)")
    for transport, row in rows.items():
        print(f"  {TRANSPORTS[transport]:<22} {_cell(row['camera_cpu_ms_per_frame']):>11} "
              f"{_cell(row['reader_cpu_ms_per_frame']):>11} {_cell(row['cores']):>6} {row['processes']:>5} "
              f"{_cell(row['latency_p50_ms'], 1):>7} {_cell(row['latency_p99_ms'], 1):>7} {row['frames_checked']:>8} "
              f"{row['bad']:>4}" + (f"   cut short by {row['cut_by']}: partial" if row.get("cut_by") else ""))
    print("  a reader's CPU ms a frame by thread (median of the readers; main: the executor and the callbacks):")
    for transport, row in rows.items():
        split = ", ".join(f"{kind} {ms:.2f}" for kind, ms in row["reader_cpu_ms_per_frame_by_thread"].items() if ms >= 0.005)
        print(f"  {TRANSPORTS[transport]:<22} {split or '-'}")


def console_main() -> None:
    raise SystemExit(run_tool(lambda: main(sys.argv[1:])))


if __name__ == "__main__":
    console_main()
