"""The demo: a camera fanning out to preprocessing, inference, an encoder and a preview, each its own process.

    make demo                                   # 10 s at 1080p, memory auto
    make demo DEMO_ARGS="--size 4k --compose"   # or: ros2 run ros2_cuda_ipc_examples demo --size 4k

Stage 1 runs the ``fanout`` pipeline with its live table. Stages 2 and 3 run one camera ->
encoder hop for a few seconds each, first through ros2_cuda_ipc, then through
``sensor_msgs/Image`` (a download, DDS serialization and an upload per frame: what every
process boundary costs without ros2_cuda_ipc), and compare the latency. The summary goes to
``<out>/pipeline-summary.json``, the last frame the preview node downloaded to ``<out>/preview.png``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ros2_cuda_ipc_core import run_tool, tool_parser

from .arguments import add_run_arguments, options_from, positive_number
from .definitions import PipelineOptions, fanout, hop
from .runner import PipelineFailed, failure_reasons, print_outcome, report_failure, run_pipeline, write_summary

__all__ = ["main"]


def _say(text: str) -> None:
    print(f"demo: {text}", flush=True)


def _hop(options: PipelineOptions, transport: str, seconds: float) -> dict[str, Any]:
    hop_options = replace(options, frames=0, seconds=seconds, namespace=options.namespace + "_hop",
                          out_dir=options.out_dir / f"hop_{transport}")
    summary = run_pipeline(hop(hop_options, transport), hop_options, stream=None)
    encoder = summary["nodes"]["encoder"] or {}
    return {"frames_published": summary["frames_published"], "frames_checked": encoder.get("checked", 0),
            "latency_ms": encoder.get("latency_ms_total"), "latency_ms_steady": encoder.get("latency_ms_steady"),
            "cpu": {name: summary["cpu"].get(name) for name in ("camera", "encoder")}, "ok": summary["ok"],
            "interrupted": summary["interrupted"]}


def _hop_line(label: str, hop_result: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    latency = hop_result["latency_ms"] or {"p50": None, "p99": None}
    if latency["p50"] is None:
        return f"  {label:<30} {hop_result['frames_published']:>5}        0   (no frame arrived)"
    steady = hop_result.get("latency_ms_steady") or {"p50": None, "p99": None}
    cpu = [(hop_result.get("cpu", {}).get(name) or {}).get("cpu_ms_per_frame_steady") for name in ("camera", "encoder")]
    line = (f"  {label:<30} {hop_result['frames_published']:>5} {hop_result['frames_checked']:>8} "
            f"{latency['p50']:>8.1f} {latency['p99']:>8.1f} {_cell(steady['p50'])} {_cell(steady['p99'])} "
            f"{_cell(cpu[0])} {_cell(cpu[1])}")
    if baseline and baseline["latency_ms"] and baseline["latency_ms"]["p50"]:
        line += f"   {latency['p50'] / baseline['latency_ms']['p50']:.1f}x the p50 of ros2_cuda_ipc"
    return line


def _cell(value: float | None) -> str:
    return f"{value:>8.1f}" if value is not None else f"{'-':>8}"


def run_demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    options, why = options_from(parser, args)
    mode = "composed in one container" if args.compose else "separate processes"
    _say(f"frames live in {options.memory} memory: {why}")
    length = f"{options.frames} frames" if options.frames else f"{options.seconds:g} s"
    _say(f"stage 1/3: the fanout pipeline (camera -> preprocess -> inference, camera -> encoder, camera -> preview), "
         f"{options.width}x{options.height} at {options.fps:g} fps, {mode}, for {length}")
    title = f"fanout · {mode} · {options.memory} memory · {options.width}x{options.height}"
    try:
        summary = run_pipeline(fanout(options), options, compose=args.compose, executor=args.executor, title=title)
        print_outcome(summary)
        interrupted_in = 1 if summary["interrupted"] else None
        if interrupted_in is None:
            _say(f"stages 2/3 and 3/3: camera -> encoder alone, {args.hop_seconds:g} s through ros2_cuda_ipc, then "
                 f"{args.hop_seconds:g} s through sensor_msgs/Image (separate processes)")
            summary["hop"] = {"ros2_cuda_ipc": _hop(options, "ipc", args.hop_seconds)}
            if summary["hop"]["ros2_cuda_ipc"]["interrupted"]:
                interrupted_in = 2
            else:
                summary["hop"]["sensor_msgs"] = _hop(options, "sensor_msgs", args.hop_seconds)
                interrupted_in = 3 if summary["hop"]["sensor_msgs"]["interrupted"] else None
    except PipelineFailed as exc:  # the details first, the summary written (marked failed), the reason last
        return report_failure("demo", exc, options.out_dir)
    summary["interrupted_in_stage"] = interrupted_in
    if interrupted_in is None:
        frame_mib = options.width * options.height * 3 / (1 << 20)
        _say(f"the same hop, camera -> encoder, {options.width}x{options.height} rgb8 ({frame_mib:.1f} MiB a frame):")
        print(f"  {'transport':<30} {'sent':>5} {'checked':>8} {'p50 ms':>8} {'p99 ms':>8} {'p50 st':>8} {'p99 st':>8} "
              f"{'cam cpu':>8} {'enc cpu':>8}   (st: steady state, after warm-up; cpu: ms a frame, steady)")
        ipc, ros = summary["hop"]["ros2_cuda_ipc"], summary["hop"]["sensor_msgs"]
        print(_hop_line(f"ros2_cuda_ipc ({options.memory} memory)", ipc, None))
        print(_hop_line("sensor_msgs/Image (copies)", ros, ipc))
    path = write_summary(summary, options.out_dir)
    if summary["preview_png"]:
        _say(f"preview.png: {summary['preview_png']} ({options.width}x{options.height}, the last frame the preview "
             "node downloaded)")
    else:
        _say("no preview.png was written")
    _say(f"summary: {path}")
    if interrupted_in is not None:  # a stop is exit code 0, as for every tool; but it is no pass
        left = "the comparison stages did not run" if interrupted_in == 1 else "the comparison is incomplete"
        _say(f"INTERRUPTED in stage {interrupted_in}/3: not a complete run: the figures above are partial, it "
             f"is not a pass, and no verdict is given; {left}")
        return 0
    ok = summary["ok"] and all(stage["ok"] for stage in summary["hop"].values())
    hops_failed = [f"the {name} hop failed" for name, stage in summary["hop"].items() if not stage["ok"]]
    reasons = (failure_reasons(summary) if not summary["ok"] else []) + hops_failed
    _say("OK" if ok else f"FAILED: {'; '.join(reasons)}")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = tool_parser(__name__, __doc__, prog="demo")
    add_run_arguments(parser, "camera runs this long (default: 10, or until --frames when that is given)")
    parser.add_argument("--hop-seconds", type=positive_number(float), default=3.0,
                        help="length of each comparison stage (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.seconds is None and args.frames is None:
        args.seconds = 10.0
    return run_demo(parser, args)


def console_main() -> None:
    raise SystemExit(run_tool(lambda: main(sys.argv[1:])))


if __name__ == "__main__":
    console_main()
