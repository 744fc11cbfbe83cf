"""Property-based fuzz of BufferCore through real CDR: a typed error or a correct read inside the block, no lease
or fd left, the publisher able to take every block afterwards (see test_support/fuzz_invariant.py)."""

import collections

import numpy as np
import pytest
from fuzz_invariant import FUZZ, check_invariant, core_strategy, fill_core, over_the_wire, take_every_block
from hypothesis import given
from hypothesis import strategies as st

from ros2_cuda_ipc_core import BlockManager, Reader
from ros2_cuda_ipc_msgs.msg import BufferCore

BLOCKS, SIZE = 3, 8192
OUTCOMES: collections.Counter = collections.Counter()


@pytest.fixture(scope="module")
def live():
    with BlockManager(SIZE, block_count=BLOCKS, memory="host", reuse_delay=0) as pool:
        cores = []
        for value in range(BLOCKS):
            block = pool.acquire_for_publish()
            block.view((SIZE,), np.uint8)[:] = value + 1
            cores.append(block.prepare_publish(byte_size=SIZE - value))
        yield pool, cores
        take_every_block(pool)


@FUZZ
@given(data=st.data())
def test_fuzzed_buffer_cores_over_cdr_keep_the_invariant(live, data):
    pool, cores = live
    core = BufferCore()
    fill_core(core, data.draw(core_strategy(data.draw(st.sampled_from(cores)))))
    received = over_the_wire(core)

    def read():
        reader = Reader()
        try:
            return reader.read(received)
        finally:
            reader.close()

    def check_read(handle) -> None:
        assert 0 < handle.byte_size <= pool.block_size
        frame = np.asarray(handle.view((handle.byte_size,), np.uint8))
        assert (frame == handle.block_id + 1).all()  # that block's own frame, nothing of another's

    OUTCOMES[check_invariant(pool, read, check_read)] += 1


def test_the_fuzz_reached_both_outcomes():
    assert OUTCOMES["read"] > 0 and OUTCOMES["refused"] > 0, OUTCOMES
