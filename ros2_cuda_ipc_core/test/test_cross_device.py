"""Reading a pool on one GPU with a stream on another: peer mapping, one staged copy, or refusal.

The two-GPU tests skip on machines with fewer GPUs, saying so; the copy path's mechanics (the copy, the
source lease back once the copy has run, the reader-side blocks reused and bounded) also run on one GPU,
as a same-device copy; the option checks run everywhere.
"""

import time
from pathlib import Path

import numpy as np
import pytest
from gpu_marks import NO_GPU
from peers import run_peers

from ros2_cuda_ipc_core import BlockManager, DeviceMismatchError, Reader, StaleDescriptorError
from ros2_cuda_ipc_core.memory.cross_device import STAGING_BLOCKS, choose_path
from ros2_cuda_ipc_core.pool.descriptor import Descriptor

PEER = str(Path(__file__).with_name("cuda_peer.py"))


def _gpu_count() -> int:
    if NO_GPU is not None:
        return 0
    import torch

    return torch.cuda.device_count()


needs_one_gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"needs a CUDA GPU: {NO_GPU}")
needs_two_gpus = pytest.mark.skipif(_gpu_count() < 2, reason="needs two CUDA GPUs (the nvidia-h200-x2 kind)")


def wait_until(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.001)
    return bool(condition())


def test_an_unknown_cross_device_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="cross_device='sideways': expected one of 'auto', 'peer', 'copy', 'refuse'"):
        Reader(cross_device="sideways")


def test_refuse_says_what_to_do_before_asking_any_driver():
    with pytest.raises(DeviceMismatchError, match=r"stream is on CUDA device 1, the block is on device 0.*cross_device"):
        choose_path("refuse", 0, 1)


@needs_one_gpu
def test_the_staged_copy_gives_the_pool_block_back_once_copied_and_bounds_its_blocks():
    """One GPU: the copy path as a same-device copy. The bytes arrive, the publisher's block is free again while
    the copy is still held, and a consumer holding every reader-side block gets a stale refusal, not a new one."""
    import torch

    with BlockManager(1 << 20, block_count=2, memory="cuda", reuse_delay=0) as pool:
        block = pool.acquire_for_publish()
        torch.from_dlpack(block.view((1 << 20,), np.uint8)).copy_(torch.arange(1 << 20, device="cuda") % 251)
        core = block.prepare_publish(torch.cuda.current_stream())
        reader = Reader(cross_device="copy")
        stream = torch.cuda.Stream()
        reader.read(core, stream).close()  # imports the pool
        assert wait_until(lambda: reader.stats()["leases_held"] == 0)
        desc = Descriptor.from_message(core)
        imported = reader._pools[desc.instance]

        def copied_read():  # Reader.read's steps, with the copy path taken on the pool's own device
            imported.lease(desc)
            try:
                ready = imported.memory.wait_ready(desc, stream.cuda_stream)
                return reader._read_across(imported, desc, stream.cuda_stream, 0, ready)
            except BaseException:
                imported.release(desc.block_id)
                raise

        copies = [copied_read() for _ in range(STAGING_BLOCKS)]
        with torch.cuda.stream(stream):
            seen = torch.from_dlpack(copies[0].view((1 << 20,), np.uint8))
            assert seen.data_ptr() == copies[0].device_ptr != imported.memory.address(0)  # a reader-side block
            assert torch.equal(seen, (torch.arange(1 << 20, device="cuda") % 251).to(torch.uint8))
        del seen
        assert len({c.device_ptr for c in copies}) == STAGING_BLOCKS  # one reader-side block each
        stream.synchronize()
        assert wait_until(lambda: imported.leases_held == 0)  # every copy has run: the pool's block is back
        assert pool.stats()["blocks_held_by_readers"] == 0
        with pytest.raises(StaleDescriptorError, match="reader-side copies"):
            copied_read()
        assert wait_until(lambda: imported.leases_held == 0)  # the refused read left no lease
        for handle in copies:
            handle.close()
        stream.synchronize()
        again = copied_read()  # a reader-side block came back
        assert again.device_ptr in {c.device_ptr for c in copies}
        again.close()
        assert reader.stats()["copied_reads"] == STAGING_BLOCKS + 1


@needs_two_gpus
@pytest.mark.parametrize("mode", ["peer", "copy"])
def test_a_stream_on_the_other_gpu_reads_the_frame(mode):
    import torch

    torch.cuda.set_device(0)
    with BlockManager(1 << 20, block_count=2, memory="cuda", device=0, reuse_delay=0) as pool:
        block = pool.acquire_for_publish()
        torch.from_dlpack(block.view((1 << 20,), np.uint8)).fill_(7)
        core = block.prepare_publish(torch.cuda.current_stream(0))
        reader = Reader(cross_device=mode)
        stream = torch.cuda.Stream(device=1)
        with reader.read(core, stream) as handle, torch.cuda.stream(stream):
            seen = torch.from_dlpack(handle.view((1 << 20,), np.uint8))
            assert handle.device == 1 and seen.device == torch.device("cuda", 1)
            in_place = seen.data_ptr() == handle._pool.memory.address(handle.block_id * pool.block_size)
            assert in_place == (mode == "peer")  # the pool's own mapping read from GPU 1, or a copy on GPU 1
            assert int(seen.sum().item()) == 7 << 20
            del seen
        assert torch.cuda.current_device() == 0  # the caller's device untouched
        stream.synchronize()
        assert wait_until(lambda: reader.stats()["leases_held"] == 0)
        assert reader.stats()[f"{'peer' if mode == 'peer' else 'copied'}_reads"] == 1


@needs_two_gpus
def test_refuse_leaves_no_lease():
    import torch

    with BlockManager(4096, block_count=1, memory="cuda", device=0) as pool:
        core = pool.acquire_for_publish().prepare_publish()
        reader = Reader(cross_device="refuse")
        with pytest.raises(DeviceMismatchError):
            reader.read(core, torch.cuda.Stream(device=1))
        assert reader.stats()["leases_held"] == 0 and pool.stats()["blocks_held_by_readers"] == 0


@needs_two_gpus
@pytest.mark.parametrize("mode", ["peer", "copy"])
def test_300_frames_from_gpu0_to_torch_and_cupy_processes_on_gpu1(mode):
    """A producer kernel that spins 2 ms before each fill still comes first: every byte of every frame checked."""
    published, outs = run_peers(PEER, ["gpu-publisher", "300", "2", "2"],
                                [["gpu-subscriber-across", f"across_torch_{mode}", "torch", "300", "1", mode],
                                 ["gpu-subscriber-across", f"across_cupy_{mode}", "cupy", "300", "1", mode]],
                                publisher_timeout=170)
    assert published["stats"]["published"] == 300
    for out in outs:
        assert out["errors"] == [] and out["verified"] == 300
        assert out["in_place"] == (mode == "peer") and out["devices"] == [1]
        assert out["stats"][f"{'peer' if mode == 'peer' else 'copied'}_reads"] == 300

