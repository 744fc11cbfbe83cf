"""Property test of issue 35's rule for an image descriptor: parsing and checking a GpuImage's layout (dtype,
shape, strides, encoding, through real CDR) costs at most a constant times the message's size, in CPU time and
tracemalloc peak, whatever its fields claim (see test_support/parser_cost.py)."""

import collections

from fuzz_invariant import over_the_wire, uints
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_cost import measure
from rclpy.serialization import serialize_message

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_image.layout import ImageLayout
from ros2_cuda_ipc_msgs.msg import GpuImage

COST = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])
SEEN: collections.Counter = collections.Counter()
ENCODINGS = st.one_of(st.sampled_from(["", "rgb8", "bgra8", "mono16", "32FC1", "8UC3", "8UC" + "9" * 5000, "8UC\u0663",
                                       "16UC0003"]),
                      st.text(max_size=20), st.text(min_size=1000, max_size=20_000))

#: Bytes of each GpuImage DTYPE_* element (U8, U16, F16, F32, F64, S8, S16, S32).
ITEM = {0: 1, 1: 2, 2: 2, 3: 4, 4: 8, 5: 1, 6: 2, 7: 4}


@st.composite
def images(draw: st.DrawFn) -> GpuImage:
    msg = GpuImage(dtype=draw(st.one_of(st.integers(0, 7), uints(8))), encoding=draw(st.one_of(st.just(""), ENCODINGS)))
    rows, cols, channels = (draw(st.one_of(st.integers(1, 64), st.integers(1, 4), uints(32))) for _ in range(3))
    msg.shape = [rows, cols, channels]
    item = ITEM.get(msg.dtype, 1)  # the element of the dtype it says
    packed = [cols * channels * item, channels * item, item]
    if draw(st.booleans()):  # as a publisher sends it: packed rows, no encoding
        rows, cols, channels = (min(n, 64) for n in (rows, cols, channels))
        msg.dtype, msg.encoding, msg.shape = draw(st.integers(0, 7)), "", [rows, cols, channels]
        item = ITEM[msg.dtype]
        packed = [cols * channels * item, channels * item, item]
    msg.strides = [draw(st.one_of(st.just(stride & (2**64 - 1)), st.just(stride & (2**64 - 1)), uints(64)))
                   for stride in packed]
    msg.core.byte_size = draw(st.one_of(st.just(rows * packed[0] & (2**64 - 1)), uints(64)))
    return msg


@COST
@given(msg=images())
def test_checking_an_images_layout_costs_at_most_a_constant_times_its_size(msg):
    size = len(serialize_message(msg))
    received = over_the_wire(msg)
    layout, cost = measure(lambda: ImageLayout.from_message(received), (InvalidDescriptorError,))
    cost.assert_within(size, f"an image of encoding {msg.encoding[:20]!r}")
    SEEN["refused" if isinstance(layout, InvalidDescriptorError) else "valid"] += 1


def test_the_property_reached_both_outcomes():
    print(f"\nimage parse cost: {dict(SEEN)}")
    assert SEEN["refused"] and SEEN["valid"], SEEN
