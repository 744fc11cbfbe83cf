"""Test 2: PointCloud2 -> publish_pointcloud2_msg -> read -> to_pointcloud2_msg is byte-identical, for every layout,
and the reference library reads our output as what was written."""

import array

import numpy as np
import pytest
import reference_pc2 as reference
from cloud_samples import SAMPLES, cloud_msg, field_values, sample_bytes
from sensor_msgs.msg import PointCloud2
from setters import checking, values_given_to_setter
from std_msgs.msg import Header

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_pointcloud import (
    CloudLayout,
    PointCloudPublisher,
    PointCloudReader,
    publish_pointcloud2_msg,
    to_pointcloud2_msg,
)


def as_msg(layout: CloudLayout, data: np.ndarray) -> PointCloud2:
    header = Header(frame_id="lidar")
    header.stamp.sec = 1234
    return cloud_msg(layout, data, header)


def round_trip(node, topic, publisher_args, msg):
    with PointCloudPublisher(node, topic, memory="host", **publisher_args) as pub:
        sent = publish_pointcloud2_msg(pub, msg)
        reader = PointCloudReader()
        with reader.read(sent) as view:
            back = to_pointcloud2_msg(view)
        assert reader.stats()["leases_held"] == 0
        return sent, back


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_byte_identical_round_trip(node, name):
    sample = SAMPLES[name]
    layout = sample.layout
    data = sample_bytes(layout, seed=21)
    msg = as_msg(layout, data)
    args = {"fields": sample.fields, "width": sample.width, "height": sample.height, "row_step": sample.row_step}
    sent, back = round_trip(node, f"pc_bridge_{name}", args, msg)
    assert (sent.width, sent.height, sent.row_step) == (msg.width, msg.height, msg.row_step)
    assert bytes(back.data) == bytes(msg.data)  # padding bytes included
    assert (back.height, back.width, back.point_step, back.row_step, back.is_bigendian, back.is_dense) == \
        (msg.height, msg.width, msg.point_step, msg.row_step, msg.is_bigendian, msg.is_dense)
    assert list(back.fields) == list(msg.fields) and back.header == msg.header
    if layout.row_step != layout.width * layout.point_step and not reference.reads_padded_rows():
        pytest.skip(f"{reference.NAME} here ignores row_step (Humble's sensor_msgs_py); the bytes matched")
    points = reference.read_points(back)
    for field in layout.field_names:
        np.testing.assert_array_equal(points[field], field_values(layout, data, field).reshape(-1))


@pytest.mark.parametrize("name", ["ouster", "velodyne", "livox", "xyz", "xyzrgb"])
def test_reference_made_clouds_cross_and_read_back(node, name):
    layout = SAMPLES[name].layout
    points = np.frombuffer(sample_bytes(layout, seed=2).tobytes()[: layout.byte_extent], dtype=layout.dtype)
    msg = reference.create_cloud([f.to_msg() for f in layout.fields],
                                 points.reshape(layout.height, layout.width) if layout.is_organized else points)
    if msg is None:
        pytest.skip(f"{reference.NAME} here cannot make {layout.point_step}-byte points")
    _, back = round_trip(node, f"pc_bridge_ref_{name}", {"fields": SAMPLES[name].fields, "width": layout.width,
                                                        "height": layout.height}, msg)
    assert bytes(back.data) == bytes(msg.data)
    if "x" in layout.field_names:
        np.testing.assert_array_equal(reference.read_points_numpy(back, ["x", "y", "z"]),
                                      np.stack([points[c].reshape(-1) for c in "xyz"], axis=1))


def test_another_layout_is_repacked_not_refused(node):
    source = SAMPLES["velodyne_below_capacity"].layout
    data = sample_bytes(source, seed=30)
    msg = as_msg(source, data)
    sent, back = round_trip(node, "pc_bridge_repack", {"fields": "xyzi", "width": 20_000}, msg)
    assert (sent.point_step, sent.width, sent.row_step) == (16, source.width, 16 * source.width)
    points = reference.read_points(back)
    assert points.dtype.names == ("x", "y", "z", "intensity")
    for field in points.dtype.names:
        np.testing.assert_array_equal(points[field], field_values(source, data, field))


def test_big_endian_clouds_arrive_in_this_machines_order(node):
    layout = CloudLayout(8, 16, 16, 256, SAMPLES["xyzi"].layout.fields, is_bigendian=True)
    data = sample_bytes(layout, seed=31)
    sent, back = round_trip(node, "pc_bridge_big", {"fields": "xyzi", "width": 16, "height": 8}, as_msg(layout, data))
    assert not sent.is_bigendian and not back.is_bigendian
    for field in layout.field_names:
        np.testing.assert_array_equal(reference.read_points(back)[field], field_values(layout, data, field).reshape(-1))


def test_bridge_refusals_name_the_problem(node):
    layout = SAMPLES["xyzi"].layout
    msg = as_msg(layout, sample_bytes(layout))
    with PointCloudPublisher(node, "pc_bridge_bad", fields="xyzi", width=100, memory="host") as pub:
        with pytest.raises(ValueError, match="exceeds this publisher's capacity"):
            publish_pointcloud2_msg(pub, msg)
        short = as_msg(layout, sample_bytes(layout)[:-1])
        with pytest.raises(InvalidDescriptorError, match="buffer holds 79999"):
            publish_pointcloud2_msg(pub, short)
        assert pub.pool.stats()["published"] == 0


def test_to_pointcloud2_msg_gives_data_in_the_type_checking_setters_keep_as_is(node):
    """Humble's setters, and Jazzy's with ROS_PYTHON_CHECK_FIELDS=1, check any other value byte by byte."""
    layout = SAMPLES["ouster"].layout
    data = sample_bytes(layout, seed=40)
    with PointCloudPublisher(node, "pc_bridge_fast", fields="ouster", width=1024, height=128, memory="host") as pub:
        sent = publish_pointcloud2_msg(pub, as_msg(layout, data))
        with PointCloudReader().read(sent) as view:
            msg, given = values_given_to_setter("data", lambda: to_pointcloud2_msg(view))
    assert given and all(isinstance(v, array.array) and v.typecode == "B" for v in given), given
    assert bytes(msg.data) == data.tobytes()
    checked = checking(PointCloud2)
    checked.data = given[-1]
    assert checked.data is given[-1]  # the setter's fast path: no look at each byte, no copy
