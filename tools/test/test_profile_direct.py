"""profile_direct: every frame after the warm-up is matched across the two processes, its boundaries add up to its
stamp -> callback time, and Ctrl-C ends it with 0.  Real processes, host memory; no timing is asserted."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

TOOL = str(Path(__file__).resolve().parents[1] / "profile_direct.py")


def test_every_frame_is_matched_and_its_boundaries_add_up(tmp_path):
    out = tmp_path / "direct.json"
    result = subprocess.run([sys.executable, TOOL, "--count", "30", "--size", "320x240", "--json", str(out)],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    frames = report["frames"]
    assert len(frames) == 30 and report["summary"]["stamp -> callback"]["n"] == 30, report["summary"]
    for frame in frames:
        parts = [frame[name] for name in ("stamp -> direct send", "send -> delivery thread reads",
                                          "read -> frame handed over", "handed over -> callback")]
        assert all(part >= 0 for part in parts), frame
        assert abs(sum(parts) - frame["stamp -> callback"]) < 0.01, frame
    assert "30 of 30 frames matched" in result.stdout, result.stdout
    assert "WARNING" not in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_ctrl_c_ends_it_with_0():
    tool = subprocess.Popen([sys.executable, TOOL, "--count", "1000", "--size", "320x240"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _publisher_of(tool.pid):  # running: its subscription made, its publisher started
        assert tool.poll() is None and time.monotonic() < deadline, tool.communicate()
        time.sleep(0.1)
    time.sleep(1.0)
    publishers = _publisher_of(tool.pid)
    tool.send_signal(signal.SIGINT)
    _, err = tool.communicate(timeout=30)
    assert tool.returncode == 0 and "Traceback" not in err, err
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in publishers):  # its publisher is ended with it
        assert time.monotonic() < deadline, f"the publisher {publishers} outlived the tool"
        time.sleep(0.1)


def _publisher_of(pid: int) -> list[int]:
    """The pids of the tool's publisher child (its command line has ``--publish``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == pid and b"--publish" in (stat.parent / "cmdline").read_bytes():
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
