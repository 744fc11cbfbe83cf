"""Property test of issue 35's rule for a cloud's metadata: parsing and checking a GpuPointCloud2 (its fields,
steps and sizes, through real CDR) costs at most a constant times the message's size, in CPU time and in
tracemalloc's peak, whatever its fields' counts and offsets claim (see test_support/parser_cost.py).

The structured dtype, built only when asked (``view.structured``), is bounded by a constant instead: at most
``MAX_STRUCTURED_VALUES`` names, refused before it is built beyond them.
"""


from fuzz_invariant import over_the_wire, uints
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_cost import measure
from rclpy.serialization import serialize_message
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2
from ros2_cuda_ipc_pointcloud.fields import MAX_STRUCTURED_VALUES
from ros2_cuda_ipc_pointcloud.layout_cache import LayoutCache

COST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])

NAMES = st.one_of(st.sampled_from(["x", "y", "z", "a", "a_0", "a_1", "a_65535", "a_01", "", "f"]),
                  st.text(max_size=12), st.text(min_size=500, max_size=3000))
COUNTS = st.one_of(st.integers(1, 4), st.sampled_from([0, 65_536, 16_384, 4096, 4097, 2**32 - 1]), uints(32))
DATATYPES = st.one_of(st.integers(1, 8), uints(8))


@st.composite
def packed_fields(draw: st.DrawFn) -> tuple[list[PointField], int]:
    """Fields one after another (valid more often than not), their counts often large: the point_step they fill."""
    fields, offset = [], 0
    for index in range(draw(st.one_of(st.integers(1, 6), st.integers(1, 70)))):
        datatype, count = draw(st.integers(1, 8)), draw(st.one_of(st.integers(1, 3), st.sampled_from([1024, 4096, 8192])))
        name = draw(st.one_of(st.just(f"f{index}"), st.just(f"f{index}"), NAMES))
        fields.append(PointField(name=name, offset=offset, datatype=datatype, count=count))
        offset += count * {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 4, 8: 8}[datatype]
    return fields, offset


@st.composite
def clouds(draw: st.DrawFn) -> GpuPointCloud2:
    msg = GpuPointCloud2()
    if draw(st.booleans()):
        msg.fields, msg.point_step = draw(packed_fields())
        msg.point_step = draw(st.one_of(st.just(msg.point_step), st.just(msg.point_step), uints(32))) & 0xFFFFFFFF
    else:
        msg.fields = draw(st.lists(st.builds(PointField, name=NAMES, offset=st.one_of(st.integers(0, 64), uints(32)),
                                             datatype=DATATYPES, count=COUNTS), max_size=80))
        msg.point_step = draw(st.one_of(st.sampled_from([12, 65_536]), uints(32)))
    msg.height, msg.width = (draw(st.one_of(st.integers(0, 4), st.integers(0, 4), uints(32))) for _ in range(2))
    msg.row_step = draw(st.one_of(st.just(msg.width * msg.point_step & 0xFFFFFFFF), uints(32)))
    msg.is_bigendian = draw(st.booleans())
    msg.core.byte_size = draw(st.one_of(st.just(msg.height * msg.row_step), uints(64)))
    return msg


@COST
@given(msg=clouds())
def test_checking_a_clouds_metadata_costs_at_most_a_constant_times_its_size(msg):
    size = len(serialize_message(msg))
    received = over_the_wire(msg)

    def parse():
        layout = LayoutCache().layout_of(received, int(received.core.byte_size))
        for name in layout.field_names:
            layout.geometry(name)
        return layout

    layout, cost = measure(parse, (InvalidDescriptorError,))
    cost.assert_within(size, f"a cloud of {len(msg.fields)} fields")
    if isinstance(layout, InvalidDescriptorError):
        return
    dtype, cost = measure(lambda: layout.dtype, (ValueError,))
    if isinstance(dtype, ValueError):
        cost.assert_within(size, "refusing the structured dtype")
    else:
        assert len(dtype.names) <= MAX_STRUCTURED_VALUES
        cost.assert_within(0, f"a structured dtype of {len(dtype.names)} names", peak_fixed=4 << 20, cpu_fixed=2.0)
