"""benchmark_multicam's main path: a few seconds of each transport on host memory print the table and write the json.

Before: it ended on its first line of work (``'Namespace' object has no attribute 'tensor_dtype'``): its parser
lacked an option the runner's reader of them expected.  Both now take their shared options from one place.
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    assert (saved["executor"], saved["cuda_wait"]) == ("single", "auto")
    for transport, row in saved["rows"].items():
        assert row["ok"] and row["bad"] == 0 and 0 < row["frames_checked"] <= row["frames_published"], (transport, row)
        assert row["cut_by"] is None
        assert row["processes"] == 4  # two cameras and their readers, each its own process
        cells = rows[TRANSPORTS[transport]]
        assert (int(cells[-2]), int(cells[-1])) == (row["frames_checked"], row["bad"]), (cells, row)
    assert (tmp_path / "ipc" / "logs").is_dir() and (tmp_path / "sensor_msgs" / "logs").is_dir()
    ignored = [line for log in tmp_path.glob("*/logs/*.log") for line in log.read_text().splitlines()
               if "is ignored" in line]
    assert not ignored, ignored  # before: every ipc reader said its 'memory' was no parameter of EncoderLike


def _wait_for_line(log: Path, text: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.1)
    raise AssertionError(f"{log} never said {text!r}")


def _pids_alive(pids: list[int]) -> list[int]:
    def alive(pid: int) -> bool:
        status = Path(f"/proc/{pid}/status")
        try:
            return "zombie" not in status.read_text()
        except OSError:
            return False

    return [pid for pid in pids if alive(pid)]


def test_sigterm_cuts_the_running_transport_kills_its_nodes_and_runs_no_other(tmp_path):
    """Before: SIGTERM was still running 20 s later, SIGINT cut one transport and ran the others in full, and
    multicam.json read as a whole run's.  Now the nodes are killed (not asked), no other transport starts, exit 0,
    and multicam.json says what ran, what was cut and what never ran."""
    run = subprocess.Popen([*MULTICAM, "--cameras", "2", "--readers", "1", "--size", "160x120", "--fps", "10",
                            "--seconds", "600", "--memory", "host", "--namespace", "/multicam_stop_test",
                            "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for camera in ("camera0", "camera1"):  # up (each waits for its reader before its first frame)
            _wait_for_line(tmp_path / "ipc" / "logs" / f"{camera}.log", "transport ipc", run)
        nodes = [int(pid) for pid in Path(f"/proc/{run.pid}/task/{run.pid}/children").read_text().split()]
        assert len(nodes) == 4, nodes
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0 and "Traceback" not in err, out + err
    assert ("multicam: interrupted by SIGTERM: completed: none; cut short: ros2_cuda_ipc; not run: "
            "ros2_cuda_ipc (direct), sensor_msgs/Image; wrote ") in out, out + err
    assert "cut short by SIGTERM: partial" in out, out
    saved = json.loads((tmp_path / "multicam.json").read_text())
    assert saved["partial"] == {"stopped_by": "SIGTERM", "completed": [], "cut": ["ipc"],
                                "skipped": ["ipc-direct", "sensor_msgs"]}
    summary = saved["summaries"]["ipc"]
    assert summary["cut_by"] == "SIGTERM" and summary["interrupted"]
    assert set(summary["exit_codes"].values()) == {-signal.SIGKILL}, summary["exit_codes"]  # killed, not asked
    assert not _pids_alive(nodes)
    assert not (tmp_path / "ipc-direct").exists() and not (tmp_path / "sensor_msgs").exists()
    assert not (tmp_path / "multicam.png").exists()


def test_sigint_before_any_node_reported_runs_no_transport_after_it(tmp_path):
    run = subprocess.Popen([*MULTICAM, "--cameras", "1", "--readers", "1", "--size", "160x120", "--seconds", "600",
                            "--memory", "host", "--namespace", "/multicam_early_stop_test", "--out", str(tmp_path)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None
        assert run.stdout.readline().startswith("multicam: 1 cameras x 1 readers")
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0 and "Traceback" not in err, out + err
    assert "multicam: interrupted by Ctrl-C: completed: none; " in out, out + err
    partial = json.loads((tmp_path / "multicam.json").read_text())["partial"]
    assert partial["stopped_by"] == "Ctrl-C" and partial["completed"] == [] and len(partial["cut"]) <= 1
    assert partial["cut"] + partial["skipped"] == list(TRANSPORTS)
