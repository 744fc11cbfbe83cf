"""Test-wide settings: every run gets its own DDS domain, kept on this host; test support is importable."""

import os
import random
import sys
from pathlib import Path

import pytest

# Test-only helpers (ack_flow) live outside the shipped packages; peer processes inherit PYTHONPATH.
TEST_SUPPORT = str(Path(__file__).resolve().with_name("test_support"))
if TEST_SUPPORT not in sys.path:
    sys.path.insert(0, TEST_SUPPORT)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TEST_SUPPORT, os.environ.get("PYTHONPATH")) if p)

# pytest's temporary directories inside the workspace, not in /tmp/pytest-of-USER (numbered per run, so parallel
# pytest processes do not clobber each other, as one --basetemp would); .gitignore has it.
_TEMP_ROOT = Path(__file__).resolve().with_name(".pytest-tmp")
_TEMP_ROOT.mkdir(exist_ok=True)
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(_TEMP_ROOT))

# Child processes inherit these, so real multi-process tests never see another run's traffic.
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 100)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
os.environ.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "0")


@pytest.fixture(scope="module")
def node():
    """One real rclpy node per test module (rclpy initialised around it)."""
    import rclpy

    rclpy.init()
    node = rclpy.create_node("ros2_cuda_ipc_test")
    yield node
    node.destroy_node()
    rclpy.shutdown()


@pytest.fixture
def short_tmp_path():
    """A temporary directory with a short path, for Unix socket files (at most 107 bytes of path, which pytest's
    ``tmp_path`` inside a deep workspace can exceed); removed afterwards."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="r2ci-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
