"""How a process's threads wait for the GPU (core's ``set_cuda_wait``): the names and their environment variable
everywhere; on a GPU, the primary context's scheduling flag set after torch or cupy made the context, its other
flags kept, and work still synchronized."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from gpu_marks import needs_gpu

from ros2_cuda_ipc_core import CUDA_WAIT_ENVIRONMENT, CUDA_WAITS, check_cuda_wait, cuda_wait_from_environment


def test_the_waits_are_the_driver_s_scheduling_choices():
    assert CUDA_WAITS == {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}  # CU_CTX_SCHED_*
    assert all(check_cuda_wait(name) == name for name in CUDA_WAITS)


def test_a_wait_it_does_not_know_is_a_value_error_naming_the_choices():
    with pytest.raises(ValueError, match="one of auto, spin, yield, blocking") as caught:
        check_cuda_wait("sleepy" * 50)
    assert len(str(caught.value)) < 120  # the name shown cut short: it may come from outside


@pytest.mark.parametrize("value, wait", [("", None), ("  ", None), ("blocking", "blocking"), (" spin ", "spin")])
def test_the_environment_names_the_wait_or_none(monkeypatch, value, wait):
    monkeypatch.setenv(CUDA_WAIT_ENVIRONMENT, value)
    assert cuda_wait_from_environment() == wait


def test_a_bad_name_in_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv(CUDA_WAIT_ENVIRONMENT, "fast")
    with pytest.raises(ValueError, match=f"{CUDA_WAIT_ENVIRONMENT}: CUDA wait 'fast': one of"):
        cuda_wait_from_environment()


SETS_THE_WAIT = """
import sys
from cuda.bindings import driver as cu
from ros2_cuda_ipc_core import cuda_wait, set_cuda_wait
from ros2_cuda_ipc_core.memory.cuda_context import on_device

library = sys.argv[1]
if library == "torch":
    import torch
    x = torch.ones(1 << 20, device="cuda")  # the primary context made, and used, before the wait is set
else:
    import cupy
    x = cupy.ones(1 << 20)
before = cuda_wait()
with on_device(0):
    other_before = int(cu.cuCtxGetFlags()[1]) & ~0x07
for wait in ("blocking", "yield", "spin", "auto"):
    set_cuda_wait(wait)
    with on_device(0):
        other = int(cu.cuCtxGetFlags()[1]) & ~0x07
    total = float((x * 2).sum())  # work still runs and is waited for
    print(wait, cuda_wait(), other == other_before, total == 2.0 * (1 << 20), flush=True)
print("before", before)
"""


@needs_gpu
@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_the_wait_is_set_after_the_library_made_the_context(library):
    pytest.importorskip(library)
    done = subprocess.run([sys.executable, "-c", SETS_THE_WAIT, library], capture_output=True, text=True,
                          timeout=120, env={**os.environ, CUDA_WAIT_ENVIRONMENT: ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [f"{wait} {wait} True True" for wait in ("blocking", "yield", "spin")], done.stdout
    # auto: the driver may report what its heuristic chose (spin, with fewer contexts than cores) rather than auto
    wait, got, *checks = lines[3].split()
    assert wait == "auto" and got in ("auto", "spin", "yield") and checks == ["True", "True"], done.stdout
    assert lines[4].split()[0] == "before" and lines[4].split()[1] in ("auto", "spin", "yield")
