"""What a GPU test that failed after other work met: the machine's load, its busiest processes and the GPU's state.

Four rounds of the viewer's GPU file failed only on a machine that had run other GPU jobs first, never on a fresh
one (gpu-verification.md, session 21); its failure message carries this, so the next one says what the machine was
doing.  Each part is bounded (a few seconds) and says why it is missing rather than raising."""

from __future__ import annotations

import shutil
import subprocess

_GPU_QUERY = ("clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu,memory.used,"
              "clocks_throttle_reasons.active")


def machine_state() -> str:
    """Load average, the ten busiest processes (over half a second), the GPU's clocks, throttling and users."""
    parts = []
    try:
        with open("/proc/loadavg") as f:
            parts.append(f"load average {' '.join(f.read().split()[:3])}")
    except OSError as exc:
        parts.append(f"load average: unreadable ({exc.strerror})")
    frames = _run(["top", "-b", "-c", "-n", "2", "-d", "0.5", "-w", "200"]).split("\ntop - ")
    rows = frames[-1].splitlines()[6:17] if len(frames) > 1 else [f"(top: {frames[0]})"]
    parts.append("busiest processes:\n" + "\n".join(f"  {row}" for row in rows))
    if shutil.which("nvidia-smi") is None:
        parts.append("nvidia-smi: not here")
    else:
        gpu = _run(["nvidia-smi", f"--query-gpu={_GPU_QUERY}", "--format=csv"])
        apps = _run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"])
        parts.append(f"GPU:\n{gpu}\nGPU processes:\n{apps}")
    return "\n".join(parts)


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({command[0]}: {exc})"
    return done.stdout.strip() or f"({command[0]}: exit {done.returncode}, {done.stderr.strip()[:200]})"
