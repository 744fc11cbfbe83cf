"""Our layouts read clouds exactly as the reference library does (sensor_msgs_py, or the PyPI pointcloud2), and repack them."""

import numpy as np
import pytest
import reference_pc2 as reference
from cloud_samples import SAMPLES, cloud_msg, field_values, sample_bytes
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_pointcloud import NAMED_LAYOUTS, CloudLayout, repack


def test_reference_in_use():
    assert reference.NAME in ("sensor_msgs_py", "pointcloud2")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_our_dtype_is_the_reference_dtype(name):
    layout = SAMPLES[name].layout
    assert layout.dtype == reference.dtype_from_fields([f.to_msg() for f in layout.fields], layout.point_step)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_reference_reads_every_field_as_our_geometry_does(name):
    layout = SAMPLES[name].layout
    data = sample_bytes(layout, seed=11)
    msg = cloud_msg(layout, data)
    if layout.row_step != layout.width * layout.point_step and not reference.reads_padded_rows():
        pytest.skip(f"{reference.NAME} here ignores row_step (Humble's sensor_msgs_py)")
    points = reference.read_points(msg)
    assert len(points) == layout.point_count
    for name_ in layout.field_names:
        np.testing.assert_array_equal(points[name_], field_values(layout, data, name_).reshape(-1))
    if {"x", "y", "z"} <= set(layout.field_names) and layout.row_step == layout.width * layout.point_step:
        xyz = layout.xyz_geometry.host_array(data)
        np.testing.assert_array_equal(reference.read_points_numpy(msg, ["x", "y", "z"]), xyz)


@pytest.mark.parametrize("name", ["ouster", "velodyne", "livox", "xyzrgb", "velodyne_below_capacity"])
def test_reference_made_clouds_have_our_layout(name):
    layout = SAMPLES[name].layout
    points = np.frombuffer(sample_bytes(layout, seed=5).tobytes()[: layout.byte_extent], dtype=layout.dtype)
    msg = reference.create_cloud([f.to_msg() for f in layout.fields], points.reshape(layout.height, layout.width)
                                 if layout.is_organized else points)
    if msg is None:
        pytest.skip(f"{reference.NAME} here cannot make {layout.point_step}-byte points")
    assert CloudLayout.from_message(msg).validate(len(msg.data)) == layout
    assert bytes(msg.data) == points.tobytes()


def test_repack_moves_every_field_by_name():
    source = SAMPLES["velodyne_below_capacity"].layout
    data = sample_bytes(source, seed=2)
    target = CloudLayout.create("xyzi", source.width, row_step=source.width * 16 + 8)
    out = repack(data, source, target)
    assert len(out) == target.data_size
    for name in target.field_names:
        np.testing.assert_array_equal(field_values(target, out, name), field_values(source, data, name))
    assert not out[source.width * 16:].any()


def test_repack_converts_byte_order_and_width_of_values():
    fields, _ = NAMED_LAYOUTS["xyzi"]
    big = CloudLayout(4, 8, 16, 128, fields, is_bigendian=True)
    data = sample_bytes(big, seed=9)
    wide = CloudLayout.create([PointField(name=n, offset=8 * i, datatype=PointField.FLOAT64, count=1)
                               for i, n in enumerate(("intensity", "x", "y", "z"))], 8, 4)
    out = repack(data, big, wide)
    for name in ("x", "y", "z", "intensity"):
        np.testing.assert_array_equal(field_values(wide, out, name), field_values(big, data, name).astype(np.float64))
    back = repack(out, wide, big)
    for name in ("x", "y", "z", "intensity"):
        np.testing.assert_array_equal(field_values(big, back, name), field_values(big, data, name))


@pytest.mark.parametrize("target_fields,needle", [
    ("ouster", "no field 't'"),
    ([PointField(name="intensity", offset=0, datatype=PointField.UINT16, count=1)], "'intensity' is float32 .* uint16"),
    ([PointField(name="x", offset=0, datatype=PointField.FLOAT32, count=2)], "'x' has count 1 in the cloud, 2"),
])
def test_repack_refuses_what_it_cannot_carry_by_name(target_fields, needle):
    source = SAMPLES["xyzi"].layout
    with pytest.raises(InvalidDescriptorError, match=needle):
        repack(sample_bytes(source), source, CloudLayout.create(target_fields, source.width))


def test_repack_checks_the_source_bytes():
    source = SAMPLES["xyzi"].layout
    with pytest.raises(InvalidDescriptorError, match="buffer holds 100"):
        repack(np.zeros(100, np.uint8), source, source)
    with pytest.raises(ValueError, match="cannot repack"):
        repack(sample_bytes(source), source, source.with_points(width=3))
