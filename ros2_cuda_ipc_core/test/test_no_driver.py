"""Without a CUDA driver (CI): everything imports, 'auto' picks host, a CUDA descriptor says why it cannot be read."""

import os

import pytest
from gpu_marks import NO_GPU
from test_descriptors import FakePool, some_fds

from ros2_cuda_ipc_core import BlockManager, CudaUnavailableError, Reader
from ros2_cuda_ipc_core.memory.layout import MEMORY_CUDA, PoolHeader
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
    """A pool whose own header says CUDA (a fake one here: no driver, no CUDA pool) is refused saying why; the
    descriptor's own 'cuda' alone would be a bad descriptor (see test_descriptors), never 'no CUDA here'."""
    header = PoolHeader(FakePool.pool_id, MEMORY_CUDA, 0, 1, 4096, os.getpid())
    fake = FakePool(header.pack(), some_fds([header.metadata_size, 4096]))
    core = BufferCore()
    core.memory = BufferCore.MEMORY_CUDA
    core.byte_size = 16
    try:
        with pytest.raises(CudaUnavailableError) as info:
            Reader().read(fake.core(core))
    finally:
        fake.close()
    assert str(info.value) == NO_GPU
