"""Test-wide settings: every run gets its own DDS domain, kept on this host; test support is importable."""

import os
import random
import re
import sys
from collections.abc import Iterator
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

# A suite job's failures are written when they happen (test_support/failure_at_once.py).
pytest_plugins = ["failure_at_once"]


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


# --- the GPU selection: the `cuda` marker ----------------------------------------------------------------------------
# A test that skips here because it needs CUDA or a GPU (a skipif mark whose condition holds and whose reason says
# "needs ... CUDA/GPU") is marked `cuda`, as is one marked so by hand: `pytest -m cuda` on a machine without a
# visible GPU lists exactly the tests only a GPU machine runs.  tools/gpu-suite.sh --gpu-only collects them that way
# (CUDA_VISIBLE_DEVICES= hides the GPU) and then runs them on it, so a new GPU test cannot be missed by a list kept
# by hand.  A test that skips for a GPU some other way (pytest.skip inside it, a module that skips itself) where
# there is none fails instead, naming the marker: the selection would not see it.
_NEEDS_GPU = re.compile(r"\bneeds\b.*\b(CUDA|GPUs?)\b")
_GPU_WORDS = re.compile(r"\b(CUDA|GPUs?)\b")


def _skipped_for_want_of_a_gpu(item: pytest.Item) -> bool:
    for mark in item.iter_markers("skipif"):
        conditions = (mark.kwargs["condition"],) if "condition" in mark.kwargs else mark.args
        holds = any(bool(c) for c in conditions if not isinstance(c, str))  # string conditions: none here
        if holds and _NEEDS_GPU.search(str(mark.kwargs.get("reason", ""))):
            return True
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("cuda") is None and _skipped_for_want_of_a_gpu(item):
            item.add_marker(pytest.mark.cuda)


def _no_gpu_here() -> bool:
    try:
        from gpu_marks import NO_GPU
    except ImportError:  # no workspace (a setup test): nothing to tell
        return False
    return NO_GPU is not None


def _outside_the_selection(what: str, reason: str) -> str:
    return (f"{what} skipped for want of a GPU ({reason.strip()}) but is not marked `cuda`, so tools/gpu-suite.sh "
            "--gpu-only would not run it: skip it with test_support/gpu_marks.needs_gpu (or a skipif whose reason "
            "says it needs CUDA or a GPU), or mark it @pytest.mark.cuda")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("cuda") is None and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if _GPU_WORDS.search(reason) and _no_gpu_here():
            report.outcome = "failed"
            report.longrepr = _outside_the_selection(item.nodeid, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if _GPU_WORDS.search(reason) and _no_gpu_here():
            report.outcome = "failed"
            report.longrepr = _outside_the_selection(f"{collector.nodeid} (the whole module)", reason)
