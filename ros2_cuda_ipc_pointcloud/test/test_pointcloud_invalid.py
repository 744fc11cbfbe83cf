"""Test 3: each kind of invalid point-cloud metadata is refused by the reader, naming it, before any lease."""

import copy

import pytest
from sensor_msgs.msg import PointField
from setters import unchecked

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudPublisher, PointCloudReader
from ros2_cuda_ipc_pointcloud.layout_cache import LayoutCache


@pytest.fixture(scope="module")
def published(node):
    with PointCloudPublisher(node, "pc_invalid", fields="velodyne", width=100, height=4, memory="host") as pub:
        yield pub, pub.borrow().publish()


def field(name, offset, datatype=PointField.FLOAT32, count=1):
    return PointField(name=name, offset=offset, datatype=datatype, count=count)


def altered(msg: GpuPointCloud2, fields=None, **changes) -> GpuPointCloud2:
    """A copy of ``msg`` with ``changes``, built with setters that take any value (see core's test_descriptors)."""
    out = unchecked(GpuPointCloud2)
    out.header, out.fields = msg.header, list(msg.fields) if fields is None else fields
    out.core = copy.copy(msg.core)
    for name in ("height", "width", "point_step", "row_step", "is_bigendian", "is_dense"):
        setattr(out, name, changes.get(name, getattr(msg, name)))
    out.core.byte_size = changes.get("byte_size", msg.core.byte_size)
    return out


VELODYNE = [field("x", 0), field("y", 4), field("z", 8), field("intensity", 12), field("ring", 16, PointField.UINT16),
            field("time", 18)]


@pytest.mark.parametrize("change,needle", [
    ({"fields": [*VELODYNE[:5], field("time", 18, datatype=11)]}, "'time' has PointField datatype 11"),
    ({"fields": [*VELODYNE[:5], field("time", 18, count=0)]}, "'time' has count 0"),
    ({"fields": [*VELODYNE[:5], field("time", 19)]}, r"'time' spans bytes \[19, 23\) of a 22-byte point"),
    ({"fields": [*VELODYNE[:5], field("time", 16)]}, "'ring' .* overlaps field 'time'|'time' .* overlaps field 'ring'"),
    ({"fields": [*VELODYNE[:5], field("ring", 18)]}, "'ring' is a duplicate"),
    ({"fields": [field("a", 0, count=2), field("a_1", 8), *VELODYNE[3:4]]}, "name 'a_1' another field already has"),
    ({"fields": []}, "no fields"),
    ({"point_step": 0}, "point_step 0"),
    ({"point_step": 2**31, "row_step": 2**33}, "point_step 2147483648 is outside"),
    ({"row_step": 2199}, "row_step 2199 is shorter than width 100"),
    ({"height": 5}, "need 11000 bytes; the buffer holds 8800"),
    ({"width": 2**32 - 1, "row_step": 2**32 - 1}, "row_step .* shorter"),
    ({"height": 2**32 - 1, "width": 2**32 - 1, "row_step": 22 * (2**32 - 1)}, "need .* bytes; the buffer holds 8800"),
    ({"byte_size": 8799}, "the buffer holds 8799"),
])
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "after-a-valid-read"])
def test_each_invalid_metadata_raises_and_takes_no_lease(published, change, needle, warm):
    pub, msg = published
    reader = PointCloudReader()
    if warm:  # the reader's layout cache holds the valid layout: the altered one is still checked in full
        reader.read(msg).close()
    try:
        bad = altered(msg, **change)
    except AssertionError:
        pytest.skip("this distro's message setters refuse the value themselves (Humble)")
    with pytest.raises(InvalidDescriptorError, match=needle):
        reader.read(bad)
    assert reader.stats()["leases_held"] == 0 and reader.stats()["reads"] == int(warm)
    assert reader.stats()["invalid_descriptors"] == 1
    assert pub.pool.stats()["blocks_held_by_readers"] == 0


def test_the_unaltered_message_reads(published):
    _, msg = published
    with PointCloudReader().read(msg) as view:
        assert view.field("time").shape == (4, 100)


def test_layout_cache_reuses_checked_layouts_and_points(published):
    _, msg = published
    cache = LayoutCache(capacity=4)
    first = cache.layout_of(msg, 8800)
    assert cache.layout_of(msg, 8800) is first
    assert first.geometry("time") is first.geometry("time")
    smaller = cache.layout_of(altered(msg, height=1, width=7, row_step=154), 154)
    assert smaller.fields is first.fields and (smaller.height, smaller.width) == (1, 7)
    with pytest.raises(InvalidDescriptorError, match="buffer holds 8799"):
        cache.layout_of(msg, 8799)
    for width in range(1, 10):  # bounded: old entries go
        cache.layout_of(altered(msg, height=1, width=width, row_step=22 * width), 22 * width)
    assert cache.layout_of(msg, 8800) == first
