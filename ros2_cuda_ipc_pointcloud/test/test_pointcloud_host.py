"""Publisher, frame, reader and view in host memory: field views, xyz, structured, DLPack and strided copies."""

from dataclasses import replace

import numpy as np
import pytest
from block_reuse import BAD_REUSE_DELAYS, republish_once_released
from cloud_samples import SAMPLES, field_values, sample_bytes
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_pointcloud import CloudLayout, PointCloudPublisher, PointCloudReader


def fill(frame, data: np.ndarray) -> None:
    """Write a whole sample cloud (padding and all) into a frame's bytes."""
    np.asarray(frame.data)[: len(data)] = data


@pytest.fixture(scope="module")
def ouster(node):
    with PointCloudPublisher(node, "pc_host_ouster", fields="ouster", width=1024, height=128, memory="host") as pub:
        yield pub


def test_every_field_and_the_structured_array_read_back(node, ouster):
    layout = SAMPLES["ouster"].layout
    data = sample_bytes(layout, seed=1)
    frame = ouster.borrow()
    with frame:
        for name in layout.field_names:  # write through the frame's own field views
            np.asarray(frame.field(name))[...] = field_values(layout, data, name)
        msg = frame.publish(header=None)
    assert (msg.height, msg.width, msg.point_step, msg.row_step) == (128, 1024, 48, 48 * 1024)
    assert msg.core.byte_size == 128 * 1024 * 48
    reader = PointCloudReader()
    with reader.read(msg) as view:
        assert (view.height, view.width, view.point_count, view.point_step) == (128, 1024, 128 * 1024, 48)
        assert view.field_names == layout.field_names and view.fields == layout.fields and not view.is_dense
        for name in layout.field_names:
            seen = np.asarray(view.field(name))
            assert seen.shape == (128, 1024) and not seen.flags.writeable
            np.testing.assert_array_equal(seen, field_values(layout, data, name))
            np.testing.assert_array_equal(view.structured[name], field_values(layout, data, name))
        assert view.structured.shape == (128, 1024) and view.structured.dtype.itemsize == 48
        xyz = np.asarray(view.xyz)
        assert xyz.shape == (128 * 1024, 3)
        np.testing.assert_array_equal(xyz[:, 2], field_values(layout, data, "z").reshape(-1))
        del seen, xyz
    assert reader.stats()["leases_held"] == 0


def test_field_views_hold_the_lease_after_close(node, ouster):
    frame = ouster.borrow()
    np.asarray(frame.field("range"))[...] = 7
    msg = frame.publish()
    reader = PointCloudReader()
    view = reader.read(msg)
    kept = np.asarray(view.field("range"))
    view.close()
    assert reader.stats()["leases_held"] == 1 and int(kept[5, 6]) == 7
    del kept
    assert reader.stats()["leases_held"] == 0


def test_dlpack_of_aligned_fields_and_refusal_by_name_for_packed_ones(node):
    layout = SAMPLES["velodyne"].layout
    data = sample_bytes(layout, seed=4)
    with PointCloudPublisher(node, "pc_host_velodyne", fields="velodyne", width=layout.width, memory="host") as pub:
        frame = pub.borrow()
        fill(frame, data)
        msg = frame.publish()
        with PointCloudReader().read(msg) as view:
            ring = np.from_dlpack(view.field("ring"))
            np.testing.assert_array_equal(ring, field_values(layout, data, "ring"))
            with pytest.raises(BufferError, match=r"field 'time' .*byte 18"):
                view.field("time").__dlpack__()
            with pytest.raises(BufferError, match=r"xyz"):
                view.xyz.__dlpack__()
            out = np.empty(layout.width, np.float32)
            view.copy_field("time", out)
            np.testing.assert_array_equal(out, field_values(layout, data, "time"))
            np.testing.assert_array_equal(np.asarray(view.field("time")), out)  # numpy takes byte strides
            with pytest.raises(ValueError, match=r"shape|dtype|float32"):
                view.copy_field("time", np.empty(layout.width, np.float64))


def test_unorganized_clouds_below_capacity(node):
    sample = SAMPLES["livox_below_capacity"]
    data = sample_bytes(sample.layout, seed=8)
    with PointCloudPublisher(node, "pc_host_livox", fields="livox", width=sample.width, memory="host") as pub:
        frame = pub.borrow()
        assert frame.field("tag").shape == (sample.width,)
        fill(frame, data)
        msg = frame.publish(width=5, is_dense=True)
        assert (msg.width, msg.row_step, msg.is_dense, msg.core.byte_size) == (5, 90, True, 90)
        with PointCloudReader().read(msg) as view:
            assert view.field("line").shape == (5,) and view.is_dense
            np.testing.assert_array_equal(view.structured, np.frombuffer(data.tobytes(), sample.layout.dtype))
        with pytest.raises(ValueError, match="capacity"):
            pub.borrow().publish(width=sample.width + 1)
        empty = pub.borrow().publish(width=0)
        with PointCloudReader().read(empty) as view:
            assert view.field("x").shape == (0,) and view.structured.shape == (0,)


def test_publish_array_structured_raw_and_repacked(node):
    layout = SAMPLES["xyzi"].layout
    data = sample_bytes(layout, seed=6)
    points = np.frombuffer(data.tobytes(), layout.dtype)
    raw = points.view(np.float32).reshape(-1, 4)
    other_layout = points[["intensity", "z", "y", "x"]].astype([("intensity", "<f8"), ("z", "<f4"), ("y", "<f4"),
                                                               ("x", "<f4")])
    every_other = slice(0, 2000, 2)
    cases = {"same structured dtype": (points[:1000], slice(0, 1000)),
             "(N, 4) float32": (raw[:1000], slice(0, 1000)),
             "(N, 4) float32, every other row": (raw[every_other], every_other),
             "another structured layout (repacked)": (other_layout[:1000], slice(0, 1000))}
    with PointCloudPublisher(node, "pc_host_array", fields="xyzi", width=layout.width, memory="host") as pub:
        for case, (given, which) in cases.items():
            with PointCloudReader().read(pub.publish_array(given)) as view:
                assert view.width == 1000, case
                for name in layout.field_names:
                    np.testing.assert_array_equal(np.asarray(view.field(name)), field_values(layout, data, name)[which],
                                                  err_msg=case)
        with pytest.raises(ValueError, match="16-byte point"):
            pub.publish_array(np.zeros((10, 3), np.float32))
        with pytest.raises(ValueError, match="capacity"):
            pub.publish_array(np.zeros((layout.width + 1, 4), np.float32))
        with pytest.raises(InvalidDescriptorError, match="no field 'intensity'"):
            pub.publish_array(np.zeros(4, dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4")]))
        assert pub.pool.stats()["published"] == 4 and pub.pool.stats()["cancelled"] == 0


def test_organized_publish_array_keeps_row_padding(node):
    sample = SAMPLES["row_padding"]
    data = sample_bytes(sample.layout, seed=12)
    grid = np.ndarray((sample.height, sample.width), sample.layout.dtype, buffer=data.tobytes(),
                      strides=(sample.layout.row_step, 16))
    with PointCloudPublisher(node, "pc_host_grid", fields="xyzi", width=sample.width, height=sample.height,
                             row_step=sample.row_step, memory="host") as pub:
        msg = pub.publish_array(grid)
        assert msg.row_step == sample.row_step
        with PointCloudReader().read(msg) as view:
            np.testing.assert_array_equal(view.structured, grid)
            with pytest.raises(ValueError, match="row_step"):
                view.xyz  # noqa: B018


def test_publisher_arguments_are_checked(node):
    with pytest.raises(ValueError, match="capacity"):
        PointCloudPublisher(node, "pc_bad", fields="xyz", width=0)
    with pytest.raises(ValueError, match="'z' spans"):
        PointCloudPublisher(node, "pc_bad", fields="xyz", width=10, point_step=10)
    with pytest.raises(ValueError, match="row_step 100 is shorter"):
        PointCloudPublisher(node, "pc_bad", fields="xyz", width=10, height=2, row_step=100)
    assert CloudLayout.create("xyz", 10).point_step == 12


@pytest.mark.parametrize("delay", BAD_REUSE_DELAYS)
def test_a_negative_or_non_finite_reuse_delay_is_refused(node, delay):
    with pytest.raises(ValueError, match="reuse_delay must be a finite number of seconds >= 0"):
        PointCloudPublisher(node, "pc_bad", fields="xyz", width=10, memory="host", reuse_delay=delay)


def test_reuse_delay_zero_publishes_a_block_again_as_soon_as_its_reader_lets_go(node):
    with PointCloudPublisher(node, "pc_reuse", fields="xyzi", width=16, memory="host", block_count=1,
                             reuse_delay=0) as pub:
        republish_once_released(pub, PointCloudReader())


def test_big_endian_and_counted_fields_read_as_sent(node):
    """A foreign publisher's big-endian cloud with a 3-value field: numpy reads it, DLPack refuses it by name."""
    fields = [PointField(name="x", offset=0, datatype=PointField.FLOAT32, count=1),
              PointField(name="normal", offset=4, datatype=PointField.FLOAT32, count=3),
              PointField(name="label", offset=16, datatype=PointField.UINT16, count=1)]
    capacity = CloudLayout.create(fields, 50, point_step=20)
    big = replace(capacity, is_bigendian=True)
    data = sample_bytes(big, seed=13)
    with PointCloudPublisher(node, "pc_host_big", fields=fields, width=50, point_step=20, memory="host") as pub:
        msg = pub.publish_bytes(data.tobytes(), big)
        assert msg.is_bigendian
        with PointCloudReader().read(msg) as view:
            normal = np.asarray(view.field("normal"))
            assert normal.shape == (50, 3) and normal.dtype.str == ">f4"
            np.testing.assert_array_equal(normal, field_values(big, data, "normal"))
            np.testing.assert_array_equal(view.structured["normal_2"], field_values(big, data, "normal")[:, 2])
            np.testing.assert_array_equal(np.asarray(view.field("label")), field_values(big, data, "label"))
            with pytest.raises(BufferError, match=r"field 'label' .*big-endian"):
                view.field("label").__dlpack__()


def test_a_whole_cloud_is_published_with_the_message_built_ahead(node, monkeypatch):
    """The publisher fills its next message with its own layout after each DDS write; a frame of the whole capacity
    is that layout, so its fields are written once a publish (a review found twice: ``with_points`` made a new,
    equal layout every frame).  A part of the capacity is a layout of its own, written whole."""
    filled = []
    fill = CloudLayout.fill_message
    monkeypatch.setattr(CloudLayout, "fill_message", lambda self, msg: (filled.append(self.width), fill(self, msg)))
    with PointCloudPublisher(node, "pc_host_built_ahead", fields="xyz", width=64, memory="host",
                             block_count=8) as pub:
        filled.clear()  # the first message, built with the publisher
        messages = []
        for width in (None, None, 10, None):
            with pub.borrow() as frame:
                messages.append(frame.publish(width=width))
    # the whole clouds used the message built ahead; the 10-point one was written over it; each publish built the
    # next message with the capacity's layout after its DDS write
    assert filled == [64, 64, 10, 64, 64]
    assert [(m.width, m.row_step) for m in messages] == [(64, 64 * 12), (64, 64 * 12), (10, 10 * 12), (64, 64 * 12)]
