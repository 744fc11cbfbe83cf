"""tools/gpu-verify.sh, the one GPU verification script: where there is no GPU it says so at once, with exit code 2."""

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "gpu-verify.sh"


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="an NVIDIA driver is here: the script runs for real")
def test_without_a_gpu_it_refuses_at_once(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "GPU_VERIFY_OUT": str(tmp_path / "out")})
    assert out.returncode == 2, out.stderr
    assert "gpu-verify: nvidia-smi found no NVIDIA GPU here" in out.stderr
