"""The peek at a serialized typed message (a subscription's template path and direct delivery's duplicate check)
agrees with rclpy's deserialization on every typed message, keys two messages alike only where their layout fields
are, and answers None, quickly, for bytes it cannot read."""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core.typed.peek import peek_message
from ros2_cuda_ipc_msgs.msg import GpuImage, GpuPointCloud2, GpuTensor


def message(kind, frame_id="camera", socket_path="@ros2_cuda_ipc/123.4026531836/" + "ab" * 16, uid=2**40 + 7,
            pid=4242, names=("n", "cc", "hhh"), dims=(3, 3)):
    msg = kind()
    msg.header.frame_id = frame_id
    msg.core.socket_path = socket_path
    msg.core.pool_id = np.arange(16, dtype=np.uint8)
    msg.core.uid, msg.core.publisher_pid, msg.core.block_id = uid, pid, 3
    if kind is GpuPointCloud2:
        msg.fields = [PointField(name=name, offset=4 * i, datatype=7, count=1) for i, name in enumerate(names)]
    elif kind is GpuTensor:
        msg.shape, msg.strides = list(range(1, dims[0] + 1)), list(range(dims[1], 0, -1))  # empty ones too:
        msg.dim_names = list(names)  # Fast CDR pads before a sequence's 8-byte elements, not before an empty one
    else:
        msg.encoding = "rgba8"
    return msg


def _read_by_rclpy(msg):
    core = msg.core
    return (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id,
            (core.socket_path, bytes(core.pool_id), core.block_id, core.uid, core.publisher_pid, core.memory,
             core.device_id, bytes(core.event_handle), core.byte_size))


def _read_by_peek(peeked):
    core = peeked.core
    return (peeked.sec, peeked.nanosec, peeked.frame_id,
            (core.socket_path, core.pool_id, core.block_id, core.uid, core.publisher_pid, core.memory,
             core.device_id, core.event_handle, core.byte_size))


@pytest.mark.parametrize("kind", [GpuImage, GpuPointCloud2, GpuTensor])
@given(frame_id=st.text(max_size=40).filter(lambda text: "\0" not in text), uid=st.integers(0, 2**64 - 1),
       pid=st.integers(0, 2**32 - 1), names=st.lists(st.text(max_size=9), max_size=5),
       sec=st.integers(-2**31, 2**31 - 1), memory=st.integers(0, 255), handle=st.binary(min_size=64, max_size=64),
       dims=st.tuples(st.integers(0, 3), st.integers(0, 3)))
@settings(max_examples=80, deadline=None)
def test_a_peek_reads_what_deserialization_reads(kind, frame_id, uid, pid, names, sec, memory, handle, dims):
    msg = message(kind, frame_id, uid=uid, pid=pid, names=names, dims=dims)
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, 999_999_999
    msg.core.memory, msg.core.device_id, msg.core.byte_size = memory, 2**32 - 1, 2**64 - 1
    msg.core.event_handle = np.frombuffer(handle, dtype=np.uint8)
    data = serialize_message(msg)
    peeked = peek_message(data, kind)
    assert peeked is not None
    assert _read_by_peek(peeked) == _read_by_rclpy(deserialize_message(data, kind))
    for cut in range(0, len(data), 7):  # a truncated copy is never misread: None, or right (only padding went)
        truncated = peek_message(data[:cut], kind)
        assert truncated is None or _read_by_peek(truncated) == _read_by_peek(peeked)


@pytest.mark.parametrize("kind", [GpuImage, GpuPointCloud2, GpuTensor])
def test_messages_share_a_template_key_only_where_every_field_but_header_and_core_s_per_frame_ones_is_the_same(kind):
    base = peek_message(serialize_message(message(kind)), kind).template_key
    per_frame = message(kind, frame_id="lidar1", uid=9)  # a frame_id of the same length: see the next test
    per_frame.header.stamp.sec, per_frame.core.block_id = 77, 1
    per_frame.core.event_handle = np.full(64, 5, dtype=np.uint8)
    assert peek_message(serialize_message(per_frame), kind).template_key == base
    layout = message(kind, names=("n", "cc", "hhx"))
    if kind is GpuImage:
        layout.encoding = "bgra8"
    other_pool = message(kind, socket_path="@elsewhere")
    other_size = message(kind)
    other_size.core.byte_size = 1
    for other in (layout, other_pool, other_size):
        assert peek_message(serialize_message(other), kind).template_key != base


def test_the_same_layout_bytes_at_another_alignment_key_another_template():
    """A frame_id one byte longer moves the fields after the header: their padding, so their bytes, may read
    differently there, so the key holds where they start."""
    keys = {peek_message(serialize_message(message(GpuTensor, frame_id="f" * n)), GpuTensor).template_key
            for n in range(8)}
    assert len(keys) > 1


def test_a_type_without_a_top_level_header_and_core_is_never_peeked():
    from sensor_msgs.msg import Image

    from ros2_cuda_ipc_msgs.msg import BufferCore

    assert peek_message(serialize_message(Image()), Image) is None
    assert peek_message(serialize_message(BufferCore()), BufferCore) is None


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None)
def test_any_bytes_give_a_peek_or_none_never_an_error(data):
    for kind in (GpuImage, GpuPointCloud2, GpuTensor):
        result = peek_message(b"\x00\x01\x00\x00" + data, kind)
        assert result is None or (len(result.core.pool_id) == 16 and len(result.core.event_handle) == 64)


def test_a_huge_claimed_count_costs_nothing():
    """A sequence of 2**32-1 point fields in a 300-byte message is refused at its count, not walked."""
    data = bytearray(serialize_message(message(GpuPointCloud2, names=("x",))))
    at = data.index(b"x\x00") - 8  # the fields' count, before the first name's length
    data[at:at + 4] = (2**32 - 1).to_bytes(4, "little")
    assert peek_message(bytes(data), GpuPointCloud2) is None  # walking them would be hours, not this test


def test_a_template_is_learnt_only_where_the_peek_and_rclpy_read_the_same_header_and_core():
    """Crafted bytes that two CDR readers take apart differently (the peek one core, rclpy another) teach no template:
    its layout was checked against rclpy's core, and a hit would hand the peek's core to the read unchecked."""
    from ros2_cuda_ipc_core.typed.peek import Templates
    from ros2_cuda_ipc_image import ImageReader

    msg = message(GpuImage)
    msg.shape, msg.strides, msg.core.byte_size = [2, 2, 4], [8, 4, 1], 16
    peeked = peek_message(serialize_message(msg), GpuImage)
    templates = Templates(ImageReader().layout_of)
    assert templates.learn(peeked, msg) is not None and templates.get(peeked.template_key)[0] is msg
    for field, value in (("uid", 1), ("memory", 7), ("byte_size", 17), ("socket_path", "@other")):
        other = Templates(ImageReader().layout_of)
        disagreeing = peeked._replace(core=copy.copy(peeked.core))
        setattr(disagreeing.core, field, value)
        assert other.learn(disagreeing, msg) is None and other.get(peeked.template_key) is None, field
    other = Templates(ImageReader().layout_of)
    assert other.learn(peeked._replace(frame_id="elsewhere"), msg) is None


def test_a_template_of_more_than_64_kib_of_layout_fields_is_read_not_kept():
    """A peer's cloud with a megabyte of field names: its layout is checked and used for this message, and nothing
    of it is held for the next (32 of them would be 32 MiB)."""
    from ros2_cuda_ipc_core.typed.peek import Templates

    kept = Templates(lambda message: "checked layout")
    msg = message(GpuPointCloud2, names=("f" * 1000,) * 70)
    peeked = peek_message(serialize_message(msg), GpuPointCloud2)
    assert kept.learn(peeked, msg) == "checked layout" and kept.get(peeked.template_key) is None
    small = message(GpuPointCloud2)
    peeked = peek_message(serialize_message(small), GpuPointCloud2)
    assert kept.learn(peeked, small) == "checked layout" and kept.get(peeked.template_key) is not None
