"""Property test of issue 35's rule for a tensor descriptor: parsing and checking a GpuTensor's layout (DLPack
dtype, shape, strides, byte_offset, dim_names, through real CDR) costs at most a constant times the message's
size, in CPU time and tracemalloc peak, however many dimensions or names it sends (see
test_support/parser_cost.py)."""

import collections

import numpy as np
from fuzz_invariant import over_the_wire, uints
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_cost import measure
from rclpy.serialization import serialize_message

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_msgs.msg import GpuTensor
from ros2_cuda_ipc_tensor.layout import TensorLayout

COST = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])
SEEN: collections.Counter = collections.Counter()
INT64 = st.one_of(st.integers(0, 16), st.sampled_from([-1, 2**62, 2**63 - 1, -(2**63), 2**31]),
                  st.integers(-(2**63), 2**63 - 1))


def dims(values: st.SearchStrategy) -> st.SearchStrategy:
    """A few entries, mostly; sometimes thousands (the message states its rank by its length)."""
    return st.one_of(st.lists(values, max_size=6), st.lists(values, min_size=6, max_size=40),
                     st.tuples(values, st.integers(1000, 20_000)).map(lambda one_n: [one_n[0]] * one_n[1]))


@st.composite
def genuine(draw: st.DrawFn) -> GpuTensor:
    """A float32 tensor as a publisher sends it: contiguous, in its block."""
    shape = draw(st.lists(st.integers(0, 8), min_size=1, max_size=4))
    msg = GpuTensor(dtype_code=2, dtype_bits=32, dtype_lanes=1, shape=shape)
    msg.dim_names = draw(st.one_of(st.just([]), st.just([f"d{i}" for i in range(len(shape))])))
    msg.core.byte_size = 4 * int(np.prod(shape)) + draw(st.integers(0, 64))
    return msg


@st.composite
def hostile(draw: st.DrawFn) -> GpuTensor:
    msg = GpuTensor(dtype_code=draw(st.one_of(st.sampled_from([0, 1, 2, 4]), uints(8))),
                    dtype_bits=draw(st.one_of(st.sampled_from([8, 16, 32, 64]), uints(8))),
                    dtype_lanes=draw(st.one_of(st.just(1), uints(16))))
    msg.shape = draw(dims(st.one_of(st.integers(0, 8), INT64)))
    msg.strides = draw(st.one_of(st.just([]), dims(INT64)))
    msg.byte_offset = draw(st.one_of(st.just(0), uints(64)))
    msg.dim_names = draw(st.one_of(st.just([]), dims(st.text(max_size=8)),
                                   st.lists(st.text(min_size=1000, max_size=5000), max_size=4)))
    msg.core.byte_size = draw(st.one_of(st.integers(0, 4096), uints(64)))
    return msg


@COST
@given(msg=st.one_of(genuine(), hostile(), hostile()))
def test_checking_a_tensors_layout_costs_at_most_a_constant_times_its_size(msg):
    size = len(serialize_message(msg))
    received = over_the_wire(msg)
    layout, cost = measure(lambda: TensorLayout.from_message(received), (InvalidDescriptorError,))
    cost.assert_within(size, f"a tensor of {len(msg.shape)} dimensions")
    SEEN["refused" if isinstance(layout, InvalidDescriptorError) else "valid"] += 1


def test_the_property_reached_both_outcomes():
    print(f"\ntensor parse cost: {dict(SEEN)}")
    assert SEEN["refused"] and SEEN["valid"], SEEN
