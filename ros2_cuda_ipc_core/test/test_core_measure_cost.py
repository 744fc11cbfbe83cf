"""measure_cost's main path, both modes, on host memory for a few seconds: its figures printed, exit code 0."""

import re
import subprocess
import sys

TOOL = [sys.executable, "-c", "import sys; sys.argv[0] = 'measure_cost'; "
        "from ros2_cuda_ipc_core.measure_cost import main; main()"]


def test_the_tight_loop_times_both_paths():
    out = subprocess.run([*TOOL, "--count", "50"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    for path in ("acquire\\+prepare_publish", "read\\+close \\(cross-process path\\)", "read\\+close \\(same-process path\\)"):
        assert re.search(rf"^host +{path} +\d+\.\d us$", out.stdout, re.MULTILINE), out.stdout


def test_at_a_camera_s_rate_it_splits_each_read_into_its_phases():
    out = subprocess.run([*TOOL, "--rate", "50", "--count", "20", "--size-mib", "1"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    assert "host memory, 20 frames of 1 MiB at 50 Hz, cross-process" in out.stdout, out.stdout
    for phase in ("read", "view", "release", "total"):
        assert re.search(rf"^{phase} +(\d+\.\d +){{2}}\d+\.\d$", out.stdout, re.MULTILINE), out.stdout
