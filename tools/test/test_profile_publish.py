"""profile_publish: a real ImagePublisher on a real rclpy node, every step of its publish timed once a frame, the
stamp-to-DDS-write phase reported; Ctrl-C or SIGTERM ends it with 0.  No timing is asserted."""

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpu_marks import needs_gpu

TOOL = str(Path(__file__).resolve().parents[1] / "profile_publish.py")


def _steps(stdout: str) -> dict[str, float]:
    """step -> calls per frame, from the table."""
    rows = (re.fullmatch(r"(.+?)\s+(\d+\.\d\d)\s+\S+\s+\S+", line) for line in stdout.splitlines())
    return {row[1]: float(row[2]) for row in rows if row}


@pytest.mark.parametrize("memory", ["host", pytest.param("cuda", marks=needs_gpu)])
def test_every_step_of_a_publish_is_timed_once_a_frame(memory):
    result = subprocess.run([sys.executable, TOOL, "--memory", memory, "--count", "20", "--rate", "50", "--size",
                             "64x48"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    steps = _steps(result.stdout)
    once = ["PHASE publish (stamp to return)", "PHASE stamp to DDS write", "TypedPublisher.publish_block",
            "PublishBlock.prepare_publish", "BlockManager._finish (lease, metadata)", "DirectSender.send",
            f"{'CudaMemory' if memory == 'cuda' else 'HostMemory'}.record_ready"]
    for step in once:
        assert steps.get(step) == 1.0, (step, result.stdout)
    # once a frame, and a few more at start-up: the publisher declares its parameters (three /parameter_events), the
    # first message is filled ahead when the publisher is made (the next one after each DDS write)
    for step in ("rclpy Publisher.publish", "ImageLayout.fill_message"):
        assert 1.0 <= steps[step] < 1.5, (step, result.stdout)
    if memory == "cuda":
        # the tool's stream is idle at each publish (as a camera's that synchronized after its fill): the readiness
        # mark is a query and a host store, no GPU command; a CUDA pool's first use asks the driver whether timeline
        # values work by writing one, which the table spreads over the frames
        assert steps["Timeline.mark"] == 1.0 and steps["driver.cuStreamQuery"] == 1.0, result.stdout
        assert steps.get("Timeline.signal", 0.0) < 0.5 and steps.get("driver.cuStreamWriteValue64", 0.0) < 0.5, \
            result.stdout


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_ends_it_with_0_even_when_started_with_sigint_ignored(stop):
    """A loaded fresh clone's run of this test, started under a shell's `cmd &`, inherited SIGINT ignored: the
    tool ran all its frames through the Ctrl-C."""
    tool = subprocess.Popen([sys.executable, TOOL, "--memory", "host", "--count", "5000", "--rate", "500",
                             "--size", "64x48"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    # started (rcl may warn first, as Jazzy does of ROS_LOCALHOST_ONLY): the stop now lands in the publishing loop
    lines = [tool.stderr.readline()]
    while "publishing" not in lines[-1] and lines[-1] and len(lines) < 50:
        lines.append(tool.stderr.readline())
    assert "publishing" in lines[-1], lines
    time.sleep(0.5)
    tool.send_signal(stop)
    out, err = tool.communicate(timeout=20)
    assert tool.returncode == 0, err
    assert "interrupted" in out
