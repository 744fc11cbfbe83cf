"""PNG plots of a run, drawn with matplotlib when it is installed (it is optional)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .cases import TRANSPORT_LABELS, TRANSPORTS
from .whole_files import replace_whole

LATENCY_PNG = "latency_cdf.png"
FPS_PNG = "fps.png"
#: Dots per inch, and the smallest figure (inches): 1200 x 800 pixels at least, text readable at full size.
DPI = 150
MIN_FIGURE = (8.0, 16 / 3)


def matplotlib_missing() -> str | None:
    """None when plots can be drawn, else the one line saying why not."""
    if importlib.util.find_spec("matplotlib") is None:
        return "matplotlib is not installed: no plots (pip install matplotlib to get them)"
    return None


def _save(fig: Any, path: Path) -> Path:
    """``fig`` as the PNG ``path`` (written whole: see :mod:`.whole_files`), closed."""
    import matplotlib.pyplot as plt

    try:
        return replace_whole(path, lambda drawing: fig.savefig(drawing, dpi=DPI, format="png"))
    finally:
        plt.close(fig)


def draw(results: list[dict[str, Any]], out: Path) -> Iterator[Path]:
    """Latency CDFs (one panel per rate and payload) and FPS bars (per payload and transport): each file once it
    is written (a stop between them keeps those already written)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latency = [row for row in results if row["mode"] == "latency" and "ready" in row["samples_us"]]
    if latency:
        rates = list(dict.fromkeys(row["rate_hz"] for row in latency))
        payloads = list(dict.fromkeys(row["payload"] for row in latency))
        size = (max(MIN_FIGURE[0], 4.0 * len(payloads)), max(MIN_FIGURE[1], 3.2 * len(rates)))
        fig, axes = plt.subplots(len(rates), len(payloads), figsize=size, squeeze=False, sharex=True, sharey=True)
        for row in latency:
            ax = axes[rates.index(row["rate_hz"])][payloads.index(row["payload"])]
            values = np.sort(row["samples_us"]["ready"])
            ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post",
                    label=TRANSPORT_LABELS[row["transport"]], color=f"C{TRANSPORTS.index(row['transport'])}")
            ax.set_title(f"{row['payload']} at {row['rate_hz']:g} Hz", fontsize=11)
        for ax in axes.flat:
            ax.set_xscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.tick_params(labelsize=9)
        for ax in axes[-1]:
            ax.set_xlabel("publish → consumer-ready (µs)", fontsize=10)
        for ax in axes[:, 0]:
            ax.set_ylabel("fraction of frames", fontsize=10)
        axes[0][0].legend(fontsize=9, loc="lower right")
        fig.tight_layout()
        yield _save(fig, out / LATENCY_PNG)

    throughput = [row for row in results if row["mode"] == "throughput"]
    if throughput:
        payloads = list(dict.fromkeys(row["payload"] for row in throughput))
        transports = [name for name in TRANSPORTS if any(row["transport"] == name for row in throughput)]
        width = 0.8 / len(transports)
        fig, ax = plt.subplots(figsize=(max(MIN_FIGURE[0], 1.8 + 1.6 * len(payloads)), MIN_FIGURE[1]))
        for offset, name in enumerate(transports):
            rows = {row["payload"]: row["fps"] for row in throughput if row["transport"] == name}
            xs = [index + offset * width for index, payload in enumerate(payloads) if payload in rows]
            ax.bar(xs, [rows[payload] for payload in payloads if payload in rows], width,
                   label=TRANSPORT_LABELS[name], color=f"C{TRANSPORTS.index(name)}")
        ax.set_xticks([index + 0.4 - width / 2 for index in range(len(payloads))], payloads, fontsize=10)
        ax.set_yscale("log")
        ax.set_ylabel("verified frames per second", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=9)
        fig.tight_layout()
        yield _save(fig, out / FPS_PNG)


MULTICAM_PNG = "multicam.png"


def draw_multicam(rows: dict[str, dict[str, Any]], labels: dict[str, str], title: str, out: Path) -> Path:
    """Bars of benchmark_multicam's rows: CPU a frame of a camera and of a reader, and the pipeline's cores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, (per_frame, cores) = plt.subplots(1, 2, figsize=(max(MIN_FIGURE[0], 10.0), MIN_FIGURE[1]))
    x = np.arange(len(names))
    for offset, key, label in ((-0.2, "camera_cpu_ms_per_frame", "a camera"), (0.2, "reader_cpu_ms_per_frame", "a reader")):
        per_frame.bar(x + offset, [rows[n][key] or 0 for n in names], 0.4, label=label)
    per_frame.set_xticks(x, [labels[n] for n in names], rotation=15)
    per_frame.set_ylabel("CPU ms a frame (steady state)")
    per_frame.legend()
    cores.bar(x, [rows[n]["cores"] or 0 for n in names], 0.5, color="C2")
    cores.set_xticks(x, [labels[n] for n in names], rotation=15)
    cores.set_ylabel("the whole pipeline's CPU, cores")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, out / MULTICAM_PNG)
