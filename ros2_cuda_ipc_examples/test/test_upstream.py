"""A consumer says what is upstream: once 'waiting for the first message' on a topic nobody publishes, once
'publisher ... gone' when its camera is killed, and once 'has a publisher again' when another starts."""

import signal
import subprocess
import sys
import time

import pytest

CAMERA = [sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--ros-args", "-p", "memory:=host", "-p",
          "width:=160", "-p", "height:=120", "-p", "fps:=10.0", "-r", "__ns:=/upstream"]
ENCODER = [sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.encoder", "--ros-args", "-r", "__ns:=/upstream"]


def _read_until(process: subprocess.Popen, text: str, timeout: float = 60) -> list[str]:
    """Lines of ``process``'s output up to the first holding ``text`` (fails after ``timeout`` s)."""
    lines, deadline = [], time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} never came:\n{''.join(lines)}")


@pytest.mark.timeout(180)
def test_a_consumer_says_when_nothing_comes_and_when_its_publisher_goes():
    encoder = subprocess.Popen([*ENCODER, "-r", "image:=imgae"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        _read_until(encoder, "waiting for the first message on /upstream/imgae (0 publishers of it now)")
    finally:
        encoder.send_signal(signal.SIGINT)
        encoder.communicate(timeout=30)

    encoder = subprocess.Popen(ENCODER, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    camera = subprocess.Popen(CAMERA, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(8)  # frames flow
        camera.kill()  # a crash: no goodbye
        camera.wait(timeout=10)
        lines = _read_until(encoder, "publisher of /upstream/image gone after ")
        assert not any("waiting for the first message" in line for line in lines), lines  # frames had come
        camera = subprocess.Popen(CAMERA, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _read_until(encoder, "/upstream/image has a publisher again")
    finally:
        camera.kill()
        encoder.send_signal(signal.SIGINT)
        out, _ = encoder.communicate(timeout=30)
    assert encoder.returncode == 0, out


@pytest.mark.timeout(120)
def test_a_consumer_waiting_counts_only_publishers_of_its_type():
    """Before: ``inference_like`` on a GpuImage topic warned of the type, then said it waited with "1 publishers of
    it now", as if that camera could deliver.  Now a publisher of another type is counted apart."""
    camera = subprocess.Popen([*CAMERA[:-1], "__ns:=/upstream_type"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    inference = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.inference", "--ros-args",
                                  "-r", "__ns:=/upstream_type", "-r", "preprocessed:=image"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = _read_until(inference, "waiting for the first message on /upstream_type/image (0 publishers of it "
                                       "now; 1 of another type)")
        assert any("not ros2_cuda_ipc_msgs/msg/GpuTensor" in line for line in lines), lines  # the core's check too
    finally:
        camera.kill()
        inference.send_signal(signal.SIGINT)
        out, _ = inference.communicate(timeout=30)
    assert inference.returncode == 0, out
