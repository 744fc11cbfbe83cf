"""Property-based fuzz of a GpuTensor's shape, strides and byte offset: a correct view, or an InvalidDescriptorError
that names the field, never another exception, with no lease or fd left (test_support/fuzz_invariant.py).

Shapes of 0 to 18 dimensions (16 is the most a tensor may have) with extents at the edges (0, 1, 2**31, 2**62,
int64's most, negative ones), strides to match or not, huge products, and empty tensors whose other extents
no array can have. The descriptor (``core``) stays the live one, so that every refusal is the tensor fields'
own; ``TensorLayout.create``, the publisher's path, is fuzzed with Python integers beyond int64 and ranks
beyond numpy's 64.
"""

import collections
import re

import numpy as np
import pytest
from fuzz_invariant import FUZZ, check_invariant, live_or, over_the_wire, take_every_block, uints
from hypothesis import given
from hypothesis import strategies as st

from ros2_cuda_ipc_core import InvalidDescriptorError, Reader
from ros2_cuda_ipc_msgs.msg import GpuTensor
from ros2_cuda_ipc_tensor import TensorLayout, TensorPublisher, TensorReader

OUTCOMES: collections.Counter = collections.Counter()
CAPACITY = (4, 3, 5)
INT64 = 2**63
#: What a refusal of these fields must name.
FIELD = re.compile(r"^GpuTensor .*\b(shape|strides|byte_offset|core\.byte_size)\b")

EXTENTS = st.one_of(st.integers(0, 6), st.sampled_from([0, 1, 2**31, 2**32, 2**62, INT64 - 1, -1, -INT64]),
                    st.integers(-INT64, INT64 - 1))
STRIDES = st.one_of(st.integers(0, 64), st.sampled_from([1, 2**30, 2**61, 2**62, INT64 - 1, -1, -INT64]),
                    st.integers(-INT64, INT64 - 1))


@st.composite
def shapes_and_strides(draw: st.DrawFn, live_shape: list[int], live_strides: list[int], extents=EXTENTS,
                       strides=STRIDES, max_rank: int = 18) -> tuple[list[int], list[int]]:
    """Mostly the live shape or strides, else any rank of hostile ones (strides of the shape's rank, mostly)."""
    shape = draw(live_or(live_shape, st.lists(extents, max_size=max_rank)))
    rank = st.just(len(shape)) if draw(st.integers(0, 3)) else st.integers(0, max_rank)
    stride_list = draw(st.one_of(st.just([]), live_or(live_strides, rank.flatmap(
        lambda n: st.lists(strides, min_size=n, max_size=n)))))
    return shape, stride_list


@pytest.fixture(scope="module")
def live(node):
    with TensorPublisher(node, "fuzz_tensors", shape=CAPACITY, dtype=np.float32, memory="host", block_count=3,
                         reuse_delay=0) as pub:
        messages = []
        for value in range(3):
            frame = pub.borrow()
            np.asarray(frame)[...] = value + 1
            messages.append(frame.publish())
        yield pub.pool, messages
        take_every_block(pub.pool)


@FUZZ
@given(data=st.data())
def test_fuzzed_tensor_shapes_give_a_view_or_an_error_that_names_the_field(live, data):
    pool, messages = live
    good = data.draw(st.sampled_from(messages))
    msg = GpuTensor()
    msg.header, msg.core = good.header, good.core
    msg.dtype_code, msg.dtype_bits, msg.dtype_lanes = good.dtype_code, good.dtype_bits, good.dtype_lanes
    shape, strides = data.draw(shapes_and_strides(list(good.shape), list(good.strides)))
    msg.shape, msg.strides = shape, strides
    msg.byte_offset = data.draw(live_or(good.byte_offset, st.one_of(st.sampled_from([4, 8, 2**62, INT64]), uints(64))))
    received = over_the_wire(msg)
    refusals: list[Exception] = []

    def read():
        reader = TensorReader(Reader())
        try:
            return reader.read(received)
        except Exception as exc:
            refusals.append(exc)
            raise
        finally:
            reader.reader.close()

    def check_read(view) -> None:
        values = np.asarray(view)
        assert values.shape == tuple(received.shape) and view.element_strides == (
            tuple(received.strides) or TensorLayout.create(received.shape, np.float32).element_strides)
        assert view.layout.byte_extent <= received.core.byte_size <= pool.block_size

    outcome = check_invariant(pool, read, check_read)
    if outcome == "refused":
        (refusal,) = refusals
        assert type(refusal) is InvalidDescriptorError and FIELD.search(str(refusal)), repr(refusal)
    OUTCOMES[outcome] += 1


@FUZZ
@given(data=st.data())
def test_fuzzed_publisher_shapes_give_a_layout_or_an_error_that_names_the_field(data):
    huge = st.one_of(EXTENTS, st.integers(INT64, 2**70), st.integers(-(2**70), -INT64 - 1))
    shape, strides = data.draw(shapes_and_strides(list(CAPACITY), [15, 5, 1], huge, huge, max_rank=70))
    try:
        layout = TensorLayout.create(shape, np.float32, strides or None, byte_offset=data.draw(st.sampled_from(
            [0, 4, -4, INT64, 2**70])))
    except InvalidDescriptorError as exc:
        assert FIELD.search(str(exc)), exc
        OUTCOMES["create refused"] += 1
    else:
        assert layout.shape == tuple(shape) and all(abs(n) < INT64 for n in (*layout.shape, *layout.strides))
        OUTCOMES["created"] += 1


def test_the_fuzz_reached_every_outcome():
    print(f"\ntensor shape fuzz: {dict(OUTCOMES)}")  # pytest -s shows it
    assert all(OUTCOMES[name] > 0 for name in ("read", "refused", "created", "create refused")), OUTCOMES
