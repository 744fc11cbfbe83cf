"""Property-based fuzz of GpuImage through real CDR: a typed error or a correct read inside the block, no lease
or fd left, the publisher able to take every block afterwards (see test_support/fuzz_invariant.py)."""

import collections

import numpy as np
import pytest
from fuzz_invariant import FUZZ, check_invariant, core_strategy, fill_core, live_or, over_the_wire, take_every_block, uints
from hypothesis import given
from hypothesis import strategies as st

from ros2_cuda_ipc_core import Reader
from ros2_cuda_ipc_image import ImagePublisher, ImageReader
from ros2_cuda_ipc_msgs.msg import GpuImage

OUTCOMES: collections.Counter = collections.Counter()


@pytest.fixture(scope="module")
def live(node):
    with ImagePublisher(node, "fuzz_images", width=16, height=8, encoding="rgb8", row_alignment=64, memory="host",
                        block_count=3, reuse_delay=0) as pub:
        messages = []
        for value in range(3):
            frame = pub.borrow()
            frame.array[...] = value + 1
            messages.append(frame.publish())
        yield pub.pool, messages
        take_every_block(pub.pool)


@FUZZ
@given(data=st.data())
def test_fuzzed_gpu_images_over_cdr_keep_the_invariant(live, data):
    pool, messages = live
    good = data.draw(st.sampled_from(messages))
    msg = GpuImage()
    msg.dtype = data.draw(live_or(good.dtype, uints(8)))
    msg.shape = np.array(data.draw(live_or(list(good.shape), st.lists(uints(32), min_size=3, max_size=3))), np.uint32)
    msg.strides = np.array(data.draw(live_or(list(good.strides), st.lists(uints(64), min_size=3, max_size=3))),
                           np.uint64)
    msg.encoding = data.draw(live_or(good.encoding, st.sampled_from(["", "mono16", "rgba8", "32FC1", "x" * 300])))
    fill_core(msg.core, data.draw(core_strategy(good.core)))
    received = over_the_wire(msg)

    def read():
        reader = ImageReader(Reader())
        try:
            return reader.read(received)
        finally:
            reader.reader.close()

    def check_read(view) -> None:
        pixels = np.asarray(view)
        assert pixels.shape == tuple(int(n) for n in received.shape)
        assert pixels.nbytes <= pool.block_size
        assert (np.frombuffer(pixels.tobytes(), np.uint8) == view.handle.block_id + 1).all()  # its own block's frame

    OUTCOMES[check_invariant(pool, read, check_read)] += 1


def test_the_fuzz_reached_both_outcomes():
    assert OUTCOMES["read"] > 0 and OUTCOMES["refused"] > 0, OUTCOMES
