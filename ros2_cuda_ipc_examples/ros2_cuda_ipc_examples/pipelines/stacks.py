"""Where a process that will not stop is stuck below Python: every thread's name, state and kernel wait,
and the C stacks when ``gdb`` (or CUDA's ``cuda-gdb``, gdb with CUDA added) is here.

``faulthandler`` (see ``ros2_cuda_ipc_tools``' parent watch) shows the Python frames only: a main
thread inside ``destroy_node`` is inside rcl, rmw and the DDS library by then, waiting on something
another thread holds, and those threads (the DDS library's own) have no Python frame at all.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["native_stacks"]


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return "?"


def _threads(pid: int) -> list[str]:
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*"), key=lambda p: int(p.name)):
        state = _read(task / "stat").rpartition(")")[2].split()[:1]
        lines.append(f"  tid {task.name:>7} {_read(task / 'comm'):<16} state {state[0] if state else '?'} "
                     f"wchan {_read(task / 'wchan')}")
    return lines


def _debugger() -> str | None:
    """gdb, else cuda-gdb (on PATH, or where the CUDA toolkit installs it: GPU machines often have only that)."""
    for name in ("gdb", "cuda-gdb"):
        found = shutil.which(name)
        if found:
            return found
    toolkit = sorted(Path("/usr/local").glob("cuda*/bin/cuda-gdb"))
    return str(toolkit[-1]) if toolkit else None


def native_stacks(pid: int, timeout: float = 20.0) -> str:
    """Threads of ``pid`` from /proc, then ``gdb``'s backtrace of each (where gdb exists and may attach)."""
    text = [f"threads of pid {pid} (from /proc):", *_threads(pid)]
    gdb = _debugger()
    if gdb is None:
        return "\n".join([*text, "(no gdb or cuda-gdb here: no C stacks)"])
    try:
        done = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 40"],
                              capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "\n".join([*text, f"(gdb did not answer in {timeout:.0f} s)"])
    except OSError as exc:  # gdb could not be started after all
        return "\n".join([*text, f"(gdb did not start: {exc})"])
    backtraces = [line for line in done.stdout.splitlines() if line.startswith(("Thread ", "#"))]
    said = done.stderr.strip().splitlines()
    return "\n".join([*text, f"C stacks ({Path(gdb).name}):", *backtraces] if backtraces else
                     [*text, f"(gdb could not attach: {said[-1] if said else '?'})"])
