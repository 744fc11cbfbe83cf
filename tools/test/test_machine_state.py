"""test_support/machine_state.py, which a GPU test's failure carries: what the machine was doing then."""

from __future__ import annotations

import shutil
import subprocess
import sys

from machine_state import machine_state


def test_it_names_the_load_a_busy_process_and_the_gpu_or_its_absence():
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass",
                             "busy-for-machine-state"])
    try:
        state = machine_state()
    finally:
        busy.kill()
        busy.wait()
    assert state.startswith("load average ") and len(state.splitlines()[0].split()) == 5, state
    assert "busy-for-machine-state" in state.split("busiest processes:")[1], state
    memory = next(line for line in state.splitlines() if line.startswith("memory: "))
    assert "MemAvailable" in memory and "/tmp " in memory and "/dev/shm " in memory and "unreadable" not in memory, memory
    assert ("nvidia-smi: not here" in state) == (shutil.which("nvidia-smi") is None), state
