"""The peek at a serialized descriptor (direct delivery's duplicate check) agrees with rclpy's deserialization on
every typed message, and answers None, quickly, for bytes it cannot read."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.serialization import serialize_message
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core.typed.peek import peek_publication
from ros2_cuda_ipc_msgs.msg import GpuImage, GpuPointCloud2, GpuTensor


def message(kind, frame_id="camera", socket_path="@ros2_cuda_ipc/123.4026531836/" + "ab" * 16, uid=2**40 + 7,
            pid=4242, names=("n", "cc", "hhh")):
    msg = kind()
    msg.header.frame_id = frame_id
    msg.core.socket_path = socket_path
    msg.core.pool_id = np.arange(16, dtype=np.uint8)
    msg.core.uid, msg.core.publisher_pid, msg.core.block_id = uid, pid, 3
    if kind is GpuPointCloud2:
        msg.fields = [PointField(name=name, offset=4 * i, datatype=7, count=1) for i, name in enumerate(names)]
    elif kind is GpuTensor:
        msg.shape, msg.strides, msg.dim_names = [1, 2, 3], [6, 3, 1], list(names)
    else:
        msg.encoding = "rgba8"
    return msg


@pytest.mark.parametrize("kind", [GpuImage, GpuPointCloud2, GpuTensor])
@given(frame_id=st.text(max_size=40), uid=st.integers(0, 2**64 - 1), pid=st.integers(0, 2**32 - 1),
       names=st.lists(st.text(max_size=9), max_size=5))
@settings(max_examples=60, deadline=None)
def test_a_peek_reads_what_deserialization_reads(kind, frame_id, uid, pid, names):
    msg = message(kind, frame_id, uid=uid, pid=pid, names=names)
    data = serialize_message(msg)
    assert peek_publication(data, kind) == ((bytes(range(16)), msg.core.socket_path, pid), uid)
    for cut in range(0, len(data), 7):  # a truncated copy is never misread: right (past the core's pid) or None
        assert peek_publication(data[:cut], kind) in (None, ((bytes(range(16)), msg.core.socket_path, pid), uid))


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None)
def test_any_bytes_give_a_peek_or_none_never_an_error(data):
    for kind in (GpuImage, GpuPointCloud2, GpuTensor):
        result = peek_publication(b"\x00\x01\x00\x00" + data, kind)
        assert result is None or len(result[0][0]) == 16


def test_a_huge_claimed_count_costs_nothing():
    """A sequence of 2**32-1 point fields in a 300-byte message is refused at its count, not walked."""
    data = bytearray(serialize_message(message(GpuPointCloud2, names=("x",))))
    at = data.index(b"x\x00") - 8  # the fields' count, before the first name's length
    data[at:at + 4] = (2**32 - 1).to_bytes(4, "little")
    assert peek_publication(bytes(data), GpuPointCloud2) is None  # walking them would be hours, not this test
