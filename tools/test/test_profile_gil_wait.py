"""profile_gil_wait: every row times every frame after its warm-up (the A/B row's frames alternate between its two
switch intervals), the baseline row's copies stay untaken while its callbacks wait, and Ctrl-C ends it with 0.  Real
processes; no timing is asserted."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOOL = str(Path(__file__).resolve().parents[1] / "profile_gil_wait.py")


@pytest.mark.long
def test_each_row_times_every_frame_after_its_warm_up(tmp_path):
    out = tmp_path / "rows.json"
    result = subprocess.run([sys.executable, TOOL, "--rate", "20", "--count", "25", "--warmup", "5", "--rows",
                             "alone", "single", "single-ab", "--json", str(out)], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["rows"]
    names = ["alone", "single", "single-ab-50", "single-ab-5000"]
    assert sorted(rows) == names
    for name, row in rows.items():
        taken, untaken = row["copy_taken_during_wait"]["n"], row["no_copy_during_wait"]["n"]
        frames = 10 if name.startswith("single-ab") else 20  # the A/B row's 20 frames alternate
        assert row["all"]["n"] == frames == taken + untaken == row["publish_to_wait_end"]["n"], (name, row)
        assert row["publish_to_wait_end"]["p50"] > 0, (name, row)
    assert rows["alone"]["copy_taken_during_wait"]["n"] == 0  # no executor spins after the warm-up: no copy taken
    assert [line.split()[0] for line in result.stdout.splitlines()] == names


@pytest.mark.long
def test_ctrl_c_ends_it_with_0(tmp_path):
    tool = subprocess.Popen([sys.executable, TOOL, "--rate", "20", "--count", "400"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(4.0)
    tool.send_signal(signal.SIGINT)
    _, err = tool.communicate(timeout=90)
    assert tool.returncode == 0 and "Traceback" not in err, err
