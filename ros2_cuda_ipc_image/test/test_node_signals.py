"""Each node executable, started as `ros2 run` starts it, ends on Ctrl-C (SIGINT) or SIGTERM with exit 0, no traceback."""

import signal
import subprocess
import time
from pathlib import Path

import pytest
from ament_index_python.packages import get_package_prefix

PACKAGE = "ros2_cuda_ipc_image"
#: executable -> (node name, a topic it subscribes to)
NODES = {"gpu_to_image": ("gpu_to_image", "/gpu_image"), "image_to_gpu": ("image_to_gpu", "/image")}


def executables() -> Path:
    return Path(get_package_prefix(PACKAGE)) / "lib" / PACKAGE


def test_every_node_executable_is_covered():
    assert sorted(p.name for p in executables().iterdir()) == sorted(NODES)


def wait_until(done, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(done())


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("executable", sorted(NODES))
def test_stop_signal_ends_the_node_cleanly(node, executable, stop):
    name, topic = NODES[executable]
    child = subprocess.Popen([str(executables() / executable), "--ros-args", "-r", f"__node:={name}_{stop.name}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        running = wait_until(lambda: child.poll() is not None or
                             (f"{name}_{stop.name}" in node.get_node_names() and node.count_subscribers(topic) > 0), 30)
        assert running and child.poll() is None, f"{executable} did not come up: {child.communicate(timeout=10)}"
        child.send_signal(stop)
        err = child.communicate(timeout=20)[1]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert "Traceback" not in err and "Exception" not in err, err
