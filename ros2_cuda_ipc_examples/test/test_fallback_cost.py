"""fallback_cost ends at once on Ctrl-C, saying how far it got, its reader and twin processes gone.

Before: it ended silently (exit 0, no line), its table lost without a word."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _running(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_ctrl_c_says_how_many_phases_ran_and_ends_its_processes() -> None:
    run = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_examples.bench.fallback_cost", "--size", "vga",
                            "--seconds", "30", "--memory", "host"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 60
        while not _children(run.pid):  # its zero-copy reader is started: the run is under way
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.1)
        started = _children(run.pid)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0 and "Traceback" not in err, out + err
    assert "fallback_cost: interrupted by Ctrl-C after 0 of 3 phases: no table" in out, out + err
    assert not [pid for pid in started if _running(pid)]
