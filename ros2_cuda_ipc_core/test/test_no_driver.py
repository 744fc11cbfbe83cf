"""Without a CUDA driver (CI): everything imports, 'auto' picks host, a CUDA descriptor says why it cannot be read."""

import numpy as np
import pytest
from gpu_marks import NO_GPU

from ros2_cuda_ipc_core import BlockManager, CudaUnavailableError, Reader
from ros2_cuda_ipc_msgs.msg import BufferCore

pytestmark = pytest.mark.skipif(NO_GPU is None, reason="a CUDA driver is present; these check its absence")


def test_auto_falls_back_to_host(caplog):
    with caplog.at_level("INFO", logger="ros2_cuda_ipc"), BlockManager(4096, memory="auto") as pool:
        assert pool.memory == "host"
    assert "chose host memory" in caplog.text


def test_cuda_pool_is_refused_with_the_cause():
    with pytest.raises(CudaUnavailableError, match=r"driver|cuda-python"):
        BlockManager(4096, memory="cuda")


def test_cuda_descriptor_raises_cuda_unavailable():
    core = BufferCore()
    core.socket_path = "@ros2_cuda_ipc/elsewhere"
    core.pool_id = np.ones(16, np.uint8)
    core.memory = BufferCore.MEMORY_CUDA
    core.byte_size = 16
    with pytest.raises(CudaUnavailableError) as info:
        Reader().read(core)
    assert str(info.value) == NO_GPU
