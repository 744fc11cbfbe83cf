"""The GPU selection (conftest.py's `cuda` marker, tools/gpu-suite.sh --gpu-only): where no GPU is visible, every test
that skips for want of one is marked, the tests that check a GPU's absence are not, and a test that skips for a GPU
without being seen by the selection fails, naming the marker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_marks import NO_GPU

ROOT = Path(__file__).resolve().parents[2]
NO_VISIBLE_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def _pytest(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=NO_VISIBLE_GPU,
                          capture_output=True, text=True, timeout=240)


def test_the_gpu_tests_are_marked_cuda_and_the_no_gpu_tests_are_not():
    listed = _pytest("-q", "--collect-only", "-m", "cuda", "ros2_cuda_ipc_image/test/test_image_cuda.py",
                     "ros2_cuda_ipc_core/test/test_no_driver.py", "ros2_cuda_ipc_image/test/test_image_bridge.py",
                     "ros2_cuda_ipc_examples/test/test_pipeline.py")
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert any(i.startswith("ros2_cuda_ipc_image/test/test_image_cuda.py::") for i in ids), ids  # pytestmark needs_gpu
    assert "ros2_cuda_ipc_examples/test/test_pipeline.py::test_fanout_on_cuda[separate-1920-1080]" in ids, ids
    assert any(i.endswith("-cuda]") for i in ids if "test_image_bridge.py" in i), ids  # MEMORIES' cuda parameter
    assert not any("test_no_driver.py" in i or i.endswith("-host]") for i in ids), ids
    assert not any("test_demo_on_cuda_without_a_gpu_says_why_at_once" in i for i in ids), ids


@pytest.mark.skipif(NO_GPU is None, reason="the check acts only where no GPU is visible, and one is here")
def test_a_gpu_skip_the_selection_cannot_see_fails(tmp_path):
    (tmp_path / "test_unseen.py").write_text(
        "import pytest\n\n"
        "def test_skips_inside():\n    pytest.skip('needs a CUDA GPU')\n\n"
        "@pytest.mark.cuda\ndef test_marked_by_hand():\n    pytest.skip('needs a CUDA GPU')\n\n"
        "def test_other_skips_are_fine():\n    pytest.skip('needs root')\n")
    (tmp_path / "test_unseen_module.py").write_text("import pytest\n\npytest.skip('no GPU here', allow_module_level=True)\n")
    run = _pytest("-q", "-rfEs", "--continue-on-collection-errors", "-p", "conftest", "--rootdir", str(tmp_path),
                  str(tmp_path), cwd=ROOT)
    out = run.stdout
    assert run.returncode == 1, out
    assert "1 failed, 2 skipped, 1 error" in out, out
    assert "test_unseen.py::test_skips_inside skipped for want of a GPU (Skipped: needs a CUDA GPU) but is not marked " \
           "`cuda`" in out, out
    assert "test_unseen_module.py (the whole module) skipped for want of a GPU" in out, out
