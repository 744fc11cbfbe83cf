"""Property-based fuzz of GpuPointCloud2 through real CDR: a typed error or a correct read inside the block, no
lease or fd left, the publisher able to take every block afterwards (see test_support/fuzz_invariant.py)."""

import collections

import numpy as np
import pytest
from fuzz_invariant import FUZZ, check_invariant, core_strategy, fill_core, live_or, over_the_wire, take_every_block, uints
from hypothesis import given
from hypothesis import strategies as st
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core import Reader
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudPublisher, PointCloudReader

OUTCOMES: collections.Counter = collections.Counter()
FIELDS = st.builds(PointField, name=st.sampled_from(["x", "y", "z", "a", "a_1", "", "i"]), offset=uints(32),
                   datatype=uints(8), count=uints(32))


@pytest.fixture(scope="module")
def live(node):
    with PointCloudPublisher(node, "fuzz_clouds", fields="xyz", width=64, height=2, memory="host", block_count=3,
                             reuse_delay=0) as pub:
        messages = []
        for value in range(3):
            frame = pub.borrow()
            frame.data.array[...] = value + 1
            messages.append(frame.publish())
        yield pub.pool, messages
        take_every_block(pub.pool)


@FUZZ
@given(data=st.data())
def test_fuzzed_gpu_point_clouds_over_cdr_keep_the_invariant(live, data):
    pool, messages = live
    good = data.draw(st.sampled_from(messages))
    msg = GpuPointCloud2()
    for name in ("height", "width", "point_step", "row_step"):
        setattr(msg, name, data.draw(live_or(getattr(good, name), uints(32))))
    msg.fields = data.draw(live_or(list(good.fields), st.lists(FIELDS, max_size=4)))
    msg.is_bigendian = data.draw(live_or(good.is_bigendian, st.booleans()))
    fill_core(msg.core, data.draw(core_strategy(good.core)))
    received = over_the_wire(msg)

    def read():
        reader = PointCloudReader(Reader())
        try:
            return reader.read(received)
        finally:
            reader.reader.close()

    def check_read(view) -> None:
        for name in view.field_names:
            values = np.asarray(view.field(name))
            assert values.nbytes <= pool.block_size
            assert (np.frombuffer(values.tobytes(), np.uint8) == view.handle.block_id + 1).all()

    OUTCOMES[check_invariant(pool, read, check_read)] += 1


def test_the_fuzz_reached_both_outcomes():
    assert OUTCOMES["read"] > 0 and OUTCOMES["refused"] > 0, OUTCOMES
