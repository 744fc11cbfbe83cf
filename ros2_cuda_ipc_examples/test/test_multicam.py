"""benchmark_multicam's main path: a few seconds of each transport on host memory print the table and write the json.

Before: it ended on its first line of work (``'Namespace' object has no attribute 'tensor_dtype'``): its parser
lacked an option the runner's reader of them expected.  Both now take their shared options from one place.
"""

import json
import subprocess
import sys

from ros2_cuda_ipc_examples.bench.multicam import TRANSPORTS

MULTICAM = [sys.executable, "-c", "import sys; from ros2_cuda_ipc_examples.bench.multicam import console_main; "
            "sys.argv[0] = 'benchmark_multicam'; console_main()"]


def test_one_camera_and_reader_through_each_transport_prints_the_table(tmp_path):
    out = subprocess.run([*MULTICAM, "--cameras", "2", "--readers", "1", "--size", "160x120", "--fps", "10",
                          "--seconds", "2", "--memory", "host", "--namespace", "/multicam_test", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "multicam: 2 cameras x 1 readers, 160x120 at 10 fps, host memory" in out.stdout, out.stdout
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["transport", "camera"])
    rows = {line[2:24].strip(): line[24:].split() for line in lines[header + 1:header + 1 + len(TRANSPORTS)]}
    assert sorted(rows) == sorted(TRANSPORTS.values()), out.stdout
    saved = json.loads((tmp_path / "multicam.json").read_text())
    assert sorted(saved["rows"]) == sorted(TRANSPORTS)
    for transport, row in saved["rows"].items():
        assert row["ok"] and row["bad"] == 0 and 0 < row["frames_checked"] <= row["frames_published"], (transport, row)
        assert row["processes"] == 4  # two cameras and their readers, each its own process
        cells = rows[TRANSPORTS[transport]]
        assert (int(cells[-2]), int(cells[-1])) == (row["frames_checked"], row["bad"]), (cells, row)
    assert (tmp_path / "ipc" / "logs").is_dir() and (tmp_path / "sensor_msgs" / "logs").is_dir()
