"""The README's demo runs end to end between two real processes."""

import subprocess
import sys

from ros2_cuda_ipc_examples import demo


def test_demo_verifies_every_frame():
    out = subprocess.run([sys.executable, demo.__file__, "--frames", "20", "--size-mib", "2", "--rate", "100"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "verified 20 frames" in out.stdout and "demo: OK" in out.stdout
