"""Test support (not shipped): tests that need a CUDA GPU skip, saying why, where none is usable."""

from __future__ import annotations

import pytest

from ros2_cuda_ipc_core.memory.cuda_driver import unavailable_reason

#: Why CUDA device 0 cannot be used here (no driver, no device, ...), or None where it can.
NO_GPU = unavailable_reason(0)
#: For a test, or a whole module (``pytestmark = needs_gpu``), that needs a CUDA GPU.
needs_gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"needs a CUDA GPU: {NO_GPU}")
#: ``memory`` for tests that run on host memory everywhere and on CUDA memory where a GPU is usable.
MEMORIES = ["host", pytest.param("cuda", marks=needs_gpu)]
