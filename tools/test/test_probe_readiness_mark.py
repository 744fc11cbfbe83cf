"""probe_readiness_mark: every variant of a timeline pool's readiness mark runs and is timed per call, on a real
GPU (it skips without one).  No timing is asserted."""

import os
import subprocess
import sys
from pathlib import Path

from gpu_marks import needs_gpu

TOOL = str(Path(__file__).resolve().parents[1] / "probe_readiness_mark.py")
VARIANTS = ["write, record", "record, write", "write", "query, write", "write, kept", "write, ctypes"]


@needs_gpu
def test_each_variant_times_each_of_its_calls():
    environment = {name: value for name, value in os.environ.items() if name != "ROS2_CUDA_IPC_SYNC"}  # a timeline pool
    result = subprocess.run([sys.executable, TOOL, "--count", "5", "--rate", "200"], capture_output=True, text=True,
                            timeout=120, env=environment)
    assert result.returncode == 0, result.stderr
    titles = [line.split(":")[0] for line in result.stdout.splitlines() if "ticks at" in line]
    assert titles == VARIANTS, result.stdout
    for call in ("cuStreamWriteValue64 ", "cuEventRecord ", "cuStreamQuery ", "(ctypes) "):
        assert call in result.stdout, (call, result.stdout)
