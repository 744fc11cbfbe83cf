"""Point-cloud layouts: named driver layouts, fields <-> dtypes, per-field geometry and every validation rule."""

import numpy as np
import pytest
from cloud_samples import SAMPLES, field_values, sample_bytes
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_pointcloud import MAX_POINT_STEP, NAMED_LAYOUTS, CloudField, CloudLayout, fields_from_dtype

F32, U32, U16, U8 = PointField.FLOAT32, PointField.UINT32, PointField.UINT16, PointField.UINT8


def offsets(name):
    fields, step = NAMED_LAYOUTS[name]
    return {f.name: (f.offset, f.datatype, f.count) for f in fields}, step


def test_driver_layouts_are_exactly_the_drivers():
    assert offsets("ouster") == ({"x": (0, F32, 1), "y": (4, F32, 1), "z": (8, F32, 1), "intensity": (16, F32, 1),
                                  "t": (20, U32, 1), "reflectivity": (24, U16, 1), "ring": (26, U16, 1),
                                  "ambient": (28, U16, 1), "range": (32, U32, 1)}, 48)
    assert offsets("velodyne") == ({"x": (0, F32, 1), "y": (4, F32, 1), "z": (8, F32, 1), "intensity": (12, F32, 1),
                                    "ring": (16, U16, 1), "time": (18, F32, 1)}, 22)
    assert offsets("livox") == ({"x": (0, F32, 1), "y": (4, F32, 1), "z": (8, F32, 1), "intensity": (12, F32, 1),
                                 "tag": (16, U8, 1), "line": (17, U8, 1)}, 18)
    assert offsets("xyz")[1] == 12 and offsets("xyzi")[1] == 16
    assert offsets("xyzrgb") == ({"x": (0, F32, 1), "y": (4, F32, 1), "z": (8, F32, 1), "rgb": (12, F32, 1)}, 16)


def test_unknown_layout_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="velodyne"):
        CloudLayout.create("hesai", 10)


def test_fields_given_three_ways_agree():
    by_name = CloudLayout.create("velodyne", 100)
    by_msgs = CloudLayout.create([f.to_msg() for f in by_name.fields], 100)
    by_dtype = CloudLayout.create(np.dtype({"names": ["x", "y", "z", "intensity", "ring", "time"],
                                            "formats": ["<f4", "<f4", "<f4", "<f4", "<u2", "<f4"],
                                            "offsets": [0, 4, 8, 12, 16, 18], "itemsize": 22}), 100)
    assert by_name == by_msgs == by_dtype
    assert by_name.point_step == 22 and by_name.row_step == 2200 and by_name.height == 1


def test_structured_dtype_keeps_offsets_and_itemsize_both_ways():
    dtype = np.dtype({"names": ["x", "normal", "label"], "formats": ["<f8", ("<f4", (3,)), "u1"],
                      "offsets": [8, 16, 40], "itemsize": 64})
    fields, step = fields_from_dtype(dtype)
    assert step == 64
    assert fields == (CloudField("x", 8, PointField.FLOAT64), CloudField("normal", 16, F32, 3),
                      CloudField("label", 40, U8))
    layout = CloudLayout.create(dtype, 10)
    assert layout.dtype.itemsize == 64 and layout.dtype.names == ("x", "normal_0", "normal_1", "normal_2", "label")
    assert layout.dtype.fields["normal_2"][1] == 24


@pytest.mark.parametrize("dtype,needle", [
    (np.dtype("<f4"), "not a structured"),
    (np.dtype([("x", "<f4"), ("p", "<i8")]), "'p'"),
    (np.dtype([("x", "<f4"), ("m", "<f4", (2, 2))]), "'m'"),
    (np.dtype([("x", ">f4")]), "byte order"),
])
def test_dtypes_without_a_pointfield_meaning_are_refused(dtype, needle):
    with pytest.raises(ValueError, match=needle):
        fields_from_dtype(dtype)


def test_field_geometry_organized_and_not():
    ouster = SAMPLES["ouster"].layout
    intensity = ouster.geometry("intensity")
    assert (intensity.offset, intensity.shape, intensity.strides) == (16, (128, 1024), (48 * 1024, 48))
    assert intensity.dtype == np.float32 and intensity.dlpack_problem is None
    velodyne = SAMPLES["velodyne"].layout
    assert velodyne.geometry("ring").shape == (28_800,) and velodyne.geometry("ring").dlpack_problem is None
    assert "byte 18" in velodyne.geometry("time").dlpack_problem and velodyne.geometry("time").name == "time"
    assert "(22,)" in velodyne.geometry("x").dlpack_problem
    livox = SAMPLES["livox"].layout
    assert livox.geometry("tag").dlpack_problem is None and livox.geometry("intensity").dlpack_problem
    counted = CloudLayout.create([PointField(name="normal", offset=0, datatype=F32, count=3)], 7, 2)
    assert counted.geometry("normal").shape == (2, 7, 3) and counted.geometry("normal").strides == (84, 12, 4)
    with pytest.raises(KeyError, match="intensity"):
        ouster.geometry("intensty")


def test_field_views_read_what_was_written():
    layout = SAMPLES["row_padding"].layout
    data = sample_bytes(layout, seed=3)
    for name in layout.field_names:
        view = layout.geometry(name).host_array(data)
        structured = np.ndarray((layout.height, layout.width), layout.dtype, buffer=data,
                                strides=(layout.row_step, layout.point_step))
        np.testing.assert_array_equal(view, structured[name])
        np.testing.assert_array_equal(field_values(layout, data, name), structured[name])


def test_xyz_geometry_only_when_consecutive_float32():
    xyz = SAMPLES["ouster"].layout.xyz_geometry
    assert (xyz.offset, xyz.shape, xyz.strides) == (0, (128 * 1024, 3), (48, 4)) and xyz.dlpack_problem is None
    assert SAMPLES["velodyne"].layout.xyz_geometry.dlpack_problem  # packed 22-byte points: CAI only
    with pytest.raises(ValueError, match="row_step"):
        SAMPLES["row_padding"].layout.xyz_geometry  # noqa: B018
    swapped = CloudLayout.create([PointField(name=n, offset=o, datatype=F32, count=1)
                                  for n, o in (("x", 0), ("z", 4), ("y", 8))], 4)
    with pytest.raises(ValueError, match=r"\.field\('x'\)"):
        swapped.xyz_geometry  # noqa: B018
    with pytest.raises(ValueError, match="no x, y and z"):
        CloudLayout.create([PointField(name="i", offset=0, datatype=F32, count=1)], 4).xyz_geometry  # noqa: B018


def test_big_endian_fields_keep_their_byte_order_and_refuse_dlpack():
    layout = CloudLayout(1, 4, 16, 64, NAMED_LAYOUTS["xyzi"][0], is_bigendian=True).validate(64)
    assert layout.geometry("intensity").dtype.str == ">f4" and "big-endian" in layout.geometry("intensity").dlpack_problem
    assert layout.geometry("intensity").host_array(np.zeros(64, np.uint8)).dtype.str == ">f4"
    assert layout.dtype["x"].str == ">f4"


def test_fewer_points_than_capacity_keep_their_addresses():
    capacity = CloudLayout.create("velodyne", 1000, row_step=1000 * 22 + 10)
    message = capacity.with_points(width=300)
    assert (message.width, message.row_step, message.height) == (300, 300 * 22 + 10, 1)
    organized = CloudLayout.create("xyz", 64, 32, row_step=1024)
    assert organized.with_points(height=8).row_step == 1024 and organized.with_points(height=8).data_size == 8 * 1024
    with pytest.raises(ValueError, match="capacity"):
        capacity.with_points(width=1001)


def fields(*specs):
    return tuple(CloudField(*spec) for spec in specs)


XYZ = NAMED_LAYOUTS["xyz"][0]


@pytest.mark.parametrize("layout,needle", [
    (CloudLayout(1, 10, 12, 120, fields(("x", 0, 7), ("y", 4, 9), ("z", 8, 7))), "'y' has PointField datatype 9"),
    (CloudLayout(1, 10, 12, 120, fields(("x", 0, 7), ("y", 4, 7, 0), ("z", 8, 7))), "'y' has count 0"),
    (CloudLayout(1, 10, 12, 120, fields(("x", 0, 7), ("y", 4, 7), ("z", 9, 7))), r"'z' spans bytes \[9, 13\)"),
    (CloudLayout(1, 10, 12, 120, fields(("x", 0, 7), ("y", 4, 7, 2), ("z", 8, 7))), "'y' .* overlaps field 'z'"),
    (CloudLayout(1, 10, 12, 120, fields(("x", 0, 7), ("y", 2, 7), ("z", 8, 7))), "'x' .* overlaps field 'y'"),
    (CloudLayout(1, 10, 12, 120, fields(("x", 0, 7), ("x", 4, 7))), "'x' is a duplicate"),
    (CloudLayout(1, 10, 12, 120, fields(("", 0, 7))), "'' is empty"),
    (CloudLayout(1, 10, 12, 120, fields(("x", 2**40, 7))), "'x' spans"),
    (CloudLayout(1, 10, 12, 120, ()), "no fields"),
    (CloudLayout(1, 10, 0, 120, XYZ), "point_step 0"),
    (CloudLayout(1, 10, MAX_POINT_STEP + 1, 2**40, XYZ), "point_step 65537"),
    (CloudLayout(2, 10, 12, 119, XYZ), "row_step 119 is shorter than width 10"),
    (CloudLayout(2, 10, 12, 120, XYZ), "need 240 bytes; the buffer holds 239"),
    (CloudLayout(2**32 - 1, 2**32 - 1, 12, 12 * (2**32 - 1), XYZ), "need .* bytes; the buffer holds 239"),
    (CloudLayout(-1, 10, 12, 120, XYZ), "height -1"),
])
def test_each_invalid_metadata_is_named(layout, needle):
    with pytest.raises(InvalidDescriptorError, match=needle):
        layout.validate(239)


def test_empty_and_exactly_fitting_clouds_are_valid():
    assert CloudLayout(1, 0, 12, 0, XYZ).validate(0).byte_extent == 0
    assert CloudLayout(2, 10, 12, 121, XYZ).validate(241).byte_extent == 241


@pytest.mark.parametrize("specs,step,clash", [
    ((("a", 0, U8, 2), ("a_1", 2, U8)), 3, "a_1"),
    ((("a_1", 0, U8), ("a", 1, U8, 2)), 3, "a_1"),  # the order of the fields does not hide it
    ((("a", 0, U8, 16_000), ("a_15999", 16_000, U8)), 16_001, "a_15999"),
    ((("a_b", 0, U8, 11), ("a_b_10", 11, U8)), 12, "a_b_10"),
    ((("a", 0, U8, 2), ("a_2", 2, U8)), 3, None),  # a of count 2 is a_0, a_1
    ((("a", 0, U8, 2), ("a_01", 2, U8)), 3, None),  # str(1) is "1"
    ((("a", 0, U8, 2), ("a_\u0661", 2, U8)), 3, None),  # an Arabic-Indic one is no index
    ((("a", 0, U8, 2), ("a_-1", 2, U8)), 3, None),
    ((("a", 0, U8, 2), ("a_" + "9" * 5000, 2, U8)), 3, None),  # never through int(): 4,300 digits is its limit
    ((("a", 0, U8, 2), ("b", 2, U8, 2), ("a_0_1", 4, U8)), 5, None),  # a_0 has no count: no a_0_1
    ((("a_1", 0, U8, 2), ("a", 2, U8, 2)), 4, None),  # a_1_0 and a_1_1 against a_0 and a_1: two names never meet
])
def test_structured_names_clash_only_where_the_expanded_dtype_would(specs, step, clash):
    layout = CloudLayout(1, 4, step, 4 * step, fields(*specs))
    if clash is None:
        layout.validate(4 * step)
        assert len(set(layout.dtype.names)) == sum(spec[3] if len(spec) > 3 else 1 for spec in specs)
    else:
        with pytest.raises(InvalidDescriptorError, match=f"name '{clash}' another field already has"):
            layout.validate(4 * step)


def test_overlapping_fields_of_huge_counts_are_refused_before_any_name_is_made():
    """Issue 35: 60 fields over one 65,536-byte point, each of count 65,536, expanded 3.9 million names first."""
    import tracemalloc

    layout = CloudLayout(1, 1, MAX_POINT_STEP, MAX_POINT_STEP,
                         fields(*((f"f{i}", 0, U8, MAX_POINT_STEP) for i in range(60))))
    tracemalloc.start()
    try:
        with pytest.raises(InvalidDescriptorError, match=r"'f\d+' \[0, 65536\) overlaps field 'f\d+' at byte 0"):
            layout.validate(MAX_POINT_STEP)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak  # was 345 MiB


def test_a_structured_dtype_of_more_values_than_it_names_is_refused_before_it_is_built():
    from ros2_cuda_ipc_pointcloud.fields import MAX_STRUCTURED_VALUES

    wide = CloudLayout(1, 2, MAX_POINT_STEP, 2 * MAX_POINT_STEP, fields(("raw", 0, U8, MAX_POINT_STEP)))
    wide.validate(2 * MAX_POINT_STEP)  # a valid cloud: its field reads as a (2, 65536) view
    assert wide.geometry("raw").shape == (2, MAX_POINT_STEP)
    with pytest.raises(ValueError, match=rf"65536 values is more than a structured array names \({MAX_STRUCTURED_VALUES}\)"):
        _ = wide.dtype
    limit = CloudLayout(1, 2, MAX_STRUCTURED_VALUES, 2 * MAX_STRUCTURED_VALUES,
                        fields(("raw", 0, U8, MAX_STRUCTURED_VALUES)))
    assert len(limit.dtype.names) == MAX_STRUCTURED_VALUES and limit.dtype is limit.dtype  # built once a layout
