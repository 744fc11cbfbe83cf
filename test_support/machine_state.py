"""What a GPU test that failed after other work met: the machine's load, its busiest processes and the GPU's state.

Four rounds of the viewer's GPU file failed only on a machine that had run other GPU jobs first, never on a fresh
one (gpu-verification.md, session 21); its failure message carries this, so the next one says what the machine was
doing.  Each part is bounded (a few seconds) and says why it is missing rather than raising."""

from __future__ import annotations

import os
import shutil
import subprocess

_GPU_QUERY = ("clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu,memory.used,"
              "clocks_throttle_reasons.active")


def machine_state() -> str:
    """Load average, the ten busiest processes (over half a second), memory and disks, the GPU's clocks, throttling
    and users."""
    parts = []
    try:
        with open("/proc/loadavg") as f:
            parts.append(f"load average {' '.join(f.read().split()[:3])}")
    except OSError as exc:
        parts.append(f"load average: unreadable ({exc.strerror})")
    frames = _run(["top", "-b", "-c", "-n", "2", "-d", "0.5", "-w", "200"]).split("\ntop - ")
    rows = frames[-1].splitlines()[6:17] if len(frames) > 1 else [f"(top: {frames[0]})"]
    parts.append("busiest processes:\n" + "\n".join(f"  {row}" for row in rows))
    parts.append(_memory_and_disks())
    if shutil.which("nvidia-smi") is None:
        parts.append("nvidia-smi: not here")
    else:
        gpu = _run(["nvidia-smi", f"--query-gpu={_GPU_QUERY}", "--format=csv"])
        apps = _run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"])
        parts.append(f"GPU:\n{gpu}\nGPU processes:\n{apps}")
    return "\n".join(parts)


def _memory_and_disks() -> str:
    """Memory free, pages not yet written back (a suite writes gigabytes of bags), and how full /tmp and /dev/shm
    are (Fast DDS's segments of killed processes stay in /dev/shm)."""
    try:
        with open("/proc/meminfo") as f:
            kib = {fields[0].rstrip(":"): int(fields[1]) for fields in map(str.split, f) if len(fields) > 1}
        memory = ", ".join(f"{name} {kib[name] // 1024} MiB" for name in ("MemAvailable", "Dirty", "Writeback")
                           if name in kib)
    except (OSError, ValueError, IndexError) as exc:
        memory = f"unreadable ({exc})"
    disks = []
    for path in ("/tmp", "/dev/shm"):
        try:
            usage = shutil.disk_usage(path)
            files = len(os.listdir(path))
        except OSError as exc:
            disks.append(f"{path} unreadable ({exc.strerror})")
            continue
        disks.append(f"{path} {usage.used >> 20} of {usage.total >> 20} MiB used, {files} entries")
    return f"memory: {memory}; disks: {'; '.join(disks)}"


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({command[0]}: {exc})"
    return done.stdout.strip() or f"({command[0]}: exit {done.returncode}, {done.stderr.strip()[:200]})"
