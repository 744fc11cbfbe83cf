"""The viewer tests' publisher process and its bounded stop (viewer_peer.py), on host memory: a clean stop says its
steps and ends with exit code 0; a peer that does not end fails the test with where it was, and is killed."""

from __future__ import annotations

import signal
import time

import pytest
from viewer_peer import ViewerPeer


def test_a_stopped_peer_says_each_step_of_its_way_out(tmp_path):
    peer = ViewerPeer(tmp_path, "image", "rgba8", "32", "24", "host", "viewer_peer_steps")
    with peer:
        lines = []
        while not any("first frame sent" in line for line in lines):  # its first frame is out: it is in its loop
            assert peer.process.poll() is None, peer.log.read_text()
            lines = peer.log.read_text().splitlines()
            time.sleep(0.05)
    steps = [line.split(": ", 1)[1] for line in peer.log.read_text().splitlines() if line.startswith("viewer_peer ")]
    assert steps[0] == "started" and steps[-1] == "node destroyed, rclpy shut down; exiting", steps
    assert "publishing from host memory" in steps and any(s.startswith("stop noted (SIGTERM)") for s in steps), steps
    assert peer.process.returncode == 0


def test_a_peer_that_does_not_end_fails_with_its_stacks_and_is_killed(tmp_path):
    peer = ViewerPeer(tmp_path, "cloud", "xyzi", "host", "viewer_peer_frozen")
    while "first frame sent" not in peer.log.read_text():
        assert peer.process.poll() is None, peer.log.read_text()
        time.sleep(0.05)
    peer.process.send_signal(signal.SIGSTOP)  # frozen: it can neither note the stop nor end itself
    with pytest.raises(AssertionError) as failed:
        peer.stop()
    report = str(failed.value)
    assert f"(pid {peer.process.pid}) still ran 10 s after its SIGTERM; killed (exit code -9)" in report, report
    assert "-- its stderr (its steps, then its Python stacks):" in report and "first frame sent" in report, report
    assert f"threads of pid {peer.process.pid} (from /proc):" in report and "state T" in report, report
    assert "-- its kernel stacks:" in report, report
