"""A run's results: one record per case (JSON), and the markdown tables a user decides by."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .cases import TRANSPORT_LABELS, Case
from .producer import SentFrames
from .whole_files import write_whole

#: Environment variables that change how DDS carries the messages (recorded with every run).
DDS_ENVIRONMENT = ("ROS_DISTRO", "RMW_IMPLEMENTATION", "FASTDDS_BUILTIN_TRANSPORTS", "FASTRTPS_DEFAULT_PROFILES_FILE",
                   "FASTDDS_DEFAULT_PROFILES_FILE", "CYCLONEDDS_URI", "ROS_LOCALHOST_ONLY", "ROS_AUTOMATIC_DISCOVERY_RANGE")
SPLIT = ("send", "arrival", "read", "view", "wait", "work", "release", "ready")


def summarise(samples: list[float]) -> dict[str, float]:
    values = np.asarray(samples, dtype=float)
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"n": len(values), "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(values.max()),
            "mean": float(values.mean())}


def case_result(case: Case, sent: SentFrames, report: dict[str, Any] | None) -> dict[str, Any]:
    """Everything known about one case.  ``measured_sent``: the measured frames the producer sent (a tick it was too
    late for, or a frame with no free block, is never sent: counted apart); ``dropped``: those not verified
    (:func:`shortfall` says why)."""
    report = report or {"received": 0, "measured": 0, "verified": 0, "bad": 0, "stale": 0, "errors": 0,
                        "last_error": "the consumer sent no report", "done_ns": 0, "samples_us": {}}
    samples = dict(report["samples_us"])
    if sent.send_us:
        samples["send"] = [round(v, 1) for v in sent.send_us]
    result: dict[str, Any] = {
        "case": case.index, "mode": case.mode, "transport": case.transport, "payload": case.payload.name,
        "payload_bytes": case.payload.byte_size, "rate_hz": case.rate, "frames": case.frames, "warmup": case.warmup,
        "sent": sent.sent, "late_ticks": sent.late_ticks, "no_block": sent.no_block, "stalls": sent.stalls,
        "unsent": sent.unsent, "warmup_not_sent": sent.warmup_not_sent,
        **{key: report[key] for key in ("received", "measured", "verified", "bad", "stale", "errors", "last_error")},
        "subscription_dropped": report.get("subscription_dropped", {}),
        "gpu_waits": report.get("gpu_waits"),
        "measured_sent": len(sent.send_us),
        "dropped": len(sent.send_us) - report["verified"],
        "cpu_ms_per_frame": {"producer": sent.cpu.ms_per_frame(), "consumer": report.get("cpu_ms_per_frame")},
        "stats_us": {phase: summarise(values) for phase, values in samples.items() if values},
        "samples_us": samples,
    }
    if case.rate is None:
        seconds = (report["done_ns"] - (sent.first_ns or 0)) / 1e9 if report["verified"] and sent.first_ns else 0.0
        result["fps"] = report["verified"] / seconds if seconds > 0 else 0.0
        result["mb_per_s"] = result["fps"] * case.payload.byte_size / 1e6
    return result


def machine(gpu_library: str | None) -> dict[str, Any]:
    """The machine and software the numbers were measured on."""
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "cpu": _cpu_model(), "cpu_count": _cpu_count(), "numpy": np.__version__}
    info["dds_environment"] = {name: os.environ[name] for name in DDS_ENVIRONMENT if name in os.environ}
    try:
        from rclpy.utilities import get_rmw_implementation_identifier

        info["rmw"] = get_rmw_implementation_identifier()
    except ImportError:  # pragma: no cover - rclpy is always there for a run
        pass
    if gpu_library == "torch":
        import torch

        info.update(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, cuda=torch.version.cuda)
    elif gpu_library == "cupy":
        import cupy

        info.update(gpu=cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), cupy=cupy.__version__)
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)


def write_json(path: Path, run: dict[str, Any]) -> None:
    """Compact (per-frame samples make it large), one record; ``python -m json.tool`` pretty-prints it."""
    write_whole(path, json.dumps(run, separators=(",", ":")) + "\n")


# --- markdown ---------------------------------------------------------------------------------------

NONE = "\u2013"  # en dash: no value
TIMES = "\u00d7"


def _us(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _ratio(value: float) -> str:
    return f"{value:.2f}{TIMES}" if value < 10 else f"{value:,.0f}{TIMES}"


def _groups(results: list[dict[str, Any]], mode: str) -> dict[tuple[Any, str], list[dict[str, Any]]]:
    """Rows of one mode by (rate, payload), in run order."""
    groups: dict[tuple[Any, str], list[dict[str, Any]]] = {}
    for result in results:
        if result["mode"] == mode:
            groups.setdefault((result["rate_hz"], result["payload"]), []).append(result)
    return groups


def _of(rows: list[dict[str, Any]], transport: str, value: Callable[[dict[str, Any]], float | None]) -> float | None:
    return next((value(row) for row in rows if row["transport"] == transport), None)


def _ready_p50(row: dict[str, Any]) -> float | None:
    stats = row["stats_us"].get("ready")
    return stats["p50"] if stats else None


def _cpu(row: dict[str, Any]) -> str:
    """Producer / consumer CPU per measured frame (ms); runs recorded before the column have none."""
    cpu = row.get("cpu_ms_per_frame") or {}
    cells = [f"{cpu[side]:.3f}" if cpu.get(side) is not None else NONE for side in ("producer", "consumer")]
    return " / ".join(cells)


def _label(row: dict[str, Any]) -> str:
    return f"| {row['payload']} | {TRANSPORT_LABELS[row['transport']]} |"


def latency_tables(results: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    groups = _groups(results, "latency")
    for rate in dict.fromkeys(rate for rate, _ in groups):
        lines += [f"### Latency at {rate:g} Hz: publish \u2192 consumer-ready (\u00b5s)", "",
                  "| payload | transport | verified | p50 | p90 | p99 | max | sensor_msgs p50 / this p50 "
                  "| this p50 / floor p50 | CPU ms/frame producer / consumer |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for rows in (rows for (row_rate, _), rows in groups.items() if row_rate == rate):
            sensor, floor = _of(rows, "sensor_msgs", _ready_p50), _of(rows, "floor", _ready_p50)
            for row in rows:
                stats = row["stats_us"].get("ready")
                cells = [_us(stats[key]) for key in ("p50", "p90", "p99", "max")] if stats else [NONE] * 4
                mine = _ready_p50(row)
                vs_sensor = _ratio(sensor / mine) if sensor and mine else NONE
                vs_floor = _ratio(mine / floor) if floor and mine else NONE
                lines.append(f"{_label(row)} {_verified(row)} | " + " | ".join(cells)
                             + f" | {vs_sensor} | {vs_floor} | {_cpu(row)} |")
        lines.append("")
    return lines


def split_tables(results: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    groups = _groups(results, "latency")
    for rate in dict.fromkeys(rate for rate, _ in groups):
        lines += [f"### Where the time goes at {rate:g} Hz (\u00b5s, p50 / p99)", "",
                  "| payload | transport | " + " | ".join(SPLIT) + " | GPU waits |", "|---|---|" + "---:|" * (len(SPLIT) + 1)]
        for rows in (rows for (row_rate, _), rows in groups.items() if row_rate == rate):
            for row in rows:
                cells = []
                for phase in SPLIT:
                    stats = row["stats_us"].get(phase)
                    cells.append(f"{_us(stats['p50'])} / {_us(stats['p99'])}" if stats else NONE)
                waits = row.get("gpu_waits")
                cells.append(NONE if waits is None else f"{waits}/{row['measured']}")
                lines.append(f"{_label(row)} " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def throughput_table(results: list[dict[str, Any]], in_flight: int) -> list[str]:
    groups = _groups(results, "throughput")
    if not groups:
        return []
    lines = [f"### Throughput: as fast as the pipeline goes (at most {in_flight} frames in flight)", "",
             "| payload | transport | verified | FPS | MB/s | this / sensor_msgs | this / floor "
             "| CPU ms/frame producer / consumer |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for rows in groups.values():
        sensor, floor = _of(rows, "sensor_msgs", lambda row: row["fps"]), _of(rows, "floor", lambda row: row["fps"])
        for row in rows:
            fps = row["fps"]
            moved = NONE if row["transport"] == "floor" else f"{row['mb_per_s']:,.0f}"
            lines.append(f"{_label(row)} {_verified(row)} | {fps:,.1f} | {moved} | "
                         f"{_ratio(fps / sensor) if sensor else NONE} | {f'{fps / floor:.2f}' if floor else NONE} | "
                         f"{_cpu(row)} |")
    return [*lines, ""]


def _verified(row: dict[str, Any]) -> str:
    """"verified/sent", and the measured frames never sent where there were any: "98/98 (2 not sent)"."""
    unsent = row["frames"] - row["measured_sent"]
    return f"{row['verified']}/{row['measured_sent']}" + (f" ({unsent} not sent)" if unsent else "")


#: Why a measured frame was not sent, or sent and not verified, in words; :func:`shortfall` counts them.
CAUSES = {
    "late_ticks": "ticks skipped (the producer was still sending the previous frame)",
    "no_block": "frames not sent (every block still held)",
    "unsent": "frames not sent (the case's time was up)",
    "lost": "frames sent but never delivered",
    "stale": "stale descriptors (block reused before it was read)",
    "errors": "read errors",
    "wrong": "frames with wrong bytes",
}


def shortfall(row: dict[str, Any]) -> dict[str, int]:
    """The measured frames not verified, by cause (those of :data:`CAUSES`, nonzero ones only): the first three add
    up to the frames never sent (``frames - measured_sent``), the others to ``dropped`` (``measured_sent - verified``).
    Warm-up frames are not in it: :func:`warmup_shortfall`."""
    arrived = row["measured"] + row["stale"] + row["errors"]  # the consumer's measured frames, read or not
    counts = {"late_ticks": row["late_ticks"], "no_block": row["no_block"], "unsent": row["unsent"],
              "lost": max(0, row["measured_sent"] - arrived), "stale": row["stale"], "errors": row["errors"],
              "wrong": row["measured"] - row["verified"]}
    return {cause: count for cause, count in counts.items() if count}


def warmup_shortfall(row: dict[str, Any]) -> dict[str, int]:
    """Warm-up frames (not measured) not sent, sent and never delivered, or with wrong bytes; nonzero ones only."""
    warmup_sent = row["sent"] - row["measured_sent"]
    warmup_arrived = row["received"] - (row["measured"] + row["stale"] + row["errors"])
    counts = {"not sent": row.get("warmup_not_sent", 0), "never delivered": max(0, warmup_sent - warmup_arrived),
              "with wrong bytes": row["bad"] - (row["measured"] - row["verified"])}
    return {what: count for what, count in counts.items() if count > 0}


def problems(row: dict[str, Any]) -> str:
    """Why measured frames were not sent or not verified, in words ('' when every one was both): the progress
    line and the "Frames not verified" notes both say this."""
    said = [f"{count} {CAUSES[cause]}" for cause, count in shortfall(row).items()]
    if row["stalls"]:
        said.append(f"{row['stalls']} acknowledgements that timed out")
    warmup = warmup_shortfall(row)
    if warmup:
        said.append("warm-up frames (not measured): " + ", ".join(f"{count} {what}" for what, count in warmup.items()))
    dropped = row.get("subscription_dropped") or {}
    if dropped:  # frames a direct subscription never handed to the callback, by its own counters
        said.append("the subscription dropped (warm-up included): " +
                    ", ".join(f"{count} {cause}" for cause, count in sorted(dropped.items())))
    if row["last_error"]:
        said.append(f"last error: {row['last_error']}")
    return "; ".join(said)


def problem_notes(results: list[dict[str, Any]]) -> list[str]:
    notes = []
    for row in results:
        if row["verified"] < row["frames"] or row["bad"]:  # not verified, or never sent
            pace = f"{row['rate_hz']:g} Hz" if row["rate_hz"] else "max rate"
            notes.append(f"- {row['mode']} {pace}, {row['payload']}, {TRANSPORT_LABELS[row['transport']]}: "
                         f"{_verified(row)} verified; {problems(row) or 'no other cause recorded'}")
    return ["### Frames not verified", "", *notes, ""] if notes else []


def _reuse(settings: dict[str, Any]) -> str:
    """How soon a block is reused; runs recorded before ``--reuse-delay`` existed used the default, 10 ms."""
    delay = settings.get("reuse_delay", 0.01)
    return f", each reused no sooner than {delay * 1000:g} ms after it was published"


def run_summary(run: dict[str, Any]) -> list[str]:
    """The command, the machine and the settings, above the tables."""
    machine, settings = run["machine"], run["settings"]
    hardware = f"{machine['cpu']} ({machine['cpu_count']} CPUs)" + (f", {machine['gpu']}" if machine.get("gpu") else ", no GPU")
    software = ", ".join(f"{name} {machine[name]}" for name in ("python", "numpy", "torch", "cuda", "cupy") if machine.get(name))
    where = "GPU memory" if settings["memory_used"] == "cuda" else "host memory"
    return [f"Run of {run['started']}: `{' '.join(run['command'])}`", "",
            f"- machine: {hardware}; {machine['platform']}; {software}",
            f"- DDS: {machine.get('rmw', 'rmw unknown')}"
            + "".join(f", {name}={value}" for name, value in machine.get("dds_environment", {}).items()),
            f"- frames live in {where}" + (f", touched with {settings['gpu_library_used']} on its own stream"
                                           if settings["gpu_library_used"] else "")
            + f"; {settings['frames']} measured frames per case after {settings['warmup']} warm-up frames; "
            f"{settings['blocks']} blocks per pool" + _reuse(settings), *(f"- {note}" for note in settings["notes"]), ""]


def partial_mark(run: dict[str, Any]) -> list[str]:
    """The first lines of a run that was stopped before its last case: what it is not."""
    partial = run.get("partial")
    if not partial:
        return []
    return [f"**Partial run: stopped by {partial['stopped_by']} after {partial['cases_done']} of "
            f"{partial['cases_planned']} cases.** The numbers below are those cases only.", ""]


def markdown(run: dict[str, Any]) -> str:
    rows = run["results"]
    lines = [*partial_mark(run), *run_summary(run), *latency_tables(rows), *split_tables(rows),
             *throughput_table(rows, run["settings"]["in_flight"]),
             *problem_notes(rows)]
    return "\n".join(lines)
