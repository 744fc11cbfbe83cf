"""A consumer says what is upstream: once 'waiting for the first message' on a topic nobody publishes, once
'publisher ... gone' when its camera is killed, and once 'has a publisher again' when another starts."""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from ros2_cuda_ipc_examples.pipelines.stacks import native_stacks
from ros2_cuda_ipc_tools import PARENT_PID_VARIABLE, STACKS_SIGNAL

CAMERA = [sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--ros-args", "-p", "memory:=host", "-p",
          "width:=160", "-p", "height:=120", "-p", "fps:=10.0", "-r", "__ns:=/upstream"]
# Started as the pipeline runner starts its nodes (run_component's command line): they end with this process and
# print their threads' stacks on STACKS_SIGNAL.
COMPONENT = [sys.executable, "-m", "ros2_cuda_ipc_tools.components.run_component"]
ENCODER = [*COMPONENT, "ros2_cuda_ipc_examples::EncoderLike", "--ros-args", "-r", "__ns:=/upstream"]


class _Child:
    """A node's process (run_component's command line) whose output, stdout and stderr, is read line by line on a
    thread."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, PARENT_PID_VARIABLE: str(os.getpid())})
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._pumping = threading.Thread(target=self._pump, daemon=True)
        self._pumping.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read_until(self, text: str, timeout: float = 60) -> list[str]:
        """Its lines up to the first holding ``text``.  After ``timeout`` s without it (on the H100 in session 20 a
        blocking read waited 170 s for "gone" and said nothing), it fails with what the process printed and its
        threads' stacks, Python's and, where gdb is, the C ones."""
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"{text!r} never came: it ended ({self.process.wait()}):\n{''.join(lines)}")
            lines.append(line)
            if text in line:
                return lines
        self.process.send_signal(STACKS_SIGNAL)
        time.sleep(1.0)  # faulthandler writes them from its signal handler
        lines += self._rest()
        raise AssertionError(f"{text!r} never came in {timeout} s:\n{''.join(lines)}\n"
                             f"{native_stacks(self.process.pid)}")

    def stop(self) -> tuple[int, str]:
        """SIGINT; its return code (killed if still running 30 s later) and what it printed since the last read."""
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._pumping.join(timeout=5)  # its last lines
        return self.process.returncode, "".join(self._rest())

    def _rest(self) -> list[str]:
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get() or "")
        return rest


@pytest.mark.timeout(180)
def test_a_consumer_says_when_nothing_comes_and_when_its_publisher_goes():
    encoder = _Child([*ENCODER, "-r", "image:=imgae"])
    try:
        encoder.read_until("waiting for the first message on /upstream/imgae (0 publishers of it now)")
    finally:
        encoder.stop()

    encoder = _Child(ENCODER)
    camera = subprocess.Popen(CAMERA, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(8)  # frames flow
        camera.kill()  # a crash: no goodbye
        camera.wait(timeout=10)
        lines = encoder.read_until("publisher of /upstream/image gone after ")
        assert not any("waiting for the first message" in line for line in lines), lines  # frames had come
        camera = subprocess.Popen(CAMERA, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        encoder.read_until("/upstream/image has a publisher again")
    finally:
        camera.kill()
        returncode, out = encoder.stop()
    assert returncode == 0, out


@pytest.mark.timeout(120)
def test_a_consumer_waiting_counts_only_publishers_of_its_type():
    """Before: ``inference_like`` on a GpuImage topic warned of the type, then said it waited with "1 publishers of
    it now", as if that camera could deliver.  Now a publisher of another type is counted apart."""
    camera = subprocess.Popen([*CAMERA[:-1], "__ns:=/upstream_type"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    inference = _Child([*COMPONENT, "ros2_cuda_ipc_examples::InferenceLike", "--ros-args",
                        "-r", "__ns:=/upstream_type", "-r", "preprocessed:=image"])
    try:
        lines = inference.read_until("waiting for the first message on /upstream_type/image (0 publishers of it "
                                       "now; 1 of another type)")
        assert any("not ros2_cuda_ipc_msgs/msg/GpuTensor" in line for line in lines), lines  # the core's check too
    finally:
        camera.kill()
        returncode, out = inference.stop()
    assert returncode == 0, out
