"""The core typed layer on host memory: layouts, a generic publisher / frame / reader / view over real rclpy,
field sub-views and their leases, the DLPack refusal for unaligned fields, strided copies, sources, streams."""

import gc

import numpy as np
import pytest
from block_reuse import BAD_REUSE_DELAYS, republish_once_released
from spinning import received, spin_until, spinning
from typed_cloud import FIELDS, POINT_STEP, RecordLayout, RecordReader, expected

from ros2_cuda_ipc_core import (
    DEFAULT_REUSE_DELAY,
    InvalidDescriptorError,
    Ros2CudaIpcError,
    StridedLayout,
    TypedPublisher,
    copy_rows,
    copy_strided,
    strided_source,
)
from ros2_cuda_ipc_core.memory.streams import stream_handle
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

HEIGHT, WIDTH = 3, 50
LAYOUT = RecordLayout(HEIGHT, WIDTH, row_step=WIDTH * POINT_STEP + 10)  # padded rows


@pytest.fixture
def published(node):
    with TypedPublisher(node, "typed_records", GpuPointCloud2, LAYOUT, memory="host", reuse_delay=0) as pub:
        frame = pub.borrow()
        with frame:
            for name in FIELDS:
                if name == "time":  # a strided copy in, from any array
                    frame.copy_in(LAYOUT.field(name), expected(name, HEIGHT, WIDTH).T.copy().T)
                else:
                    np.asarray(frame.array_view(LAYOUT.field(name), name))[...] = expected(name, HEIGHT, WIDTH)
            msg = frame.publish()
            with pytest.raises(Ros2CudaIpcError, match="already published"):
                frame.copy_in(LAYOUT.field("x"), expected("x", HEIGHT, WIDTH))
        yield pub, msg


# --- StridedLayout ---------------------------------------------------------------------------------------------

def test_layout_extent_and_contiguous():
    layout = StridedLayout.contiguous((4, 5), np.float32, offset=8)
    assert layout.strides == (20, 4) and layout.byte_extent == 8 + 80 and layout.padded_extent == 88
    assert layout.dlpack_problem is None
    assert StridedLayout((0, 5), (20, 4), np.dtype(np.float32), offset=8).byte_extent == 8


@pytest.mark.parametrize("layout,needle", [
    (StridedLayout((0, 4), (16, 4), np.dtype(np.float32)), "zero extent"),
    (StridedLayout((4, 4), (8, 4), np.dtype(np.float32)), "overlap"),
    (StridedLayout((4, 4), (16, 4), np.dtype(np.float32), offset=1), "outside"),
    (StridedLayout((4,), (2**63,), np.dtype(np.uint8)), "outside"),
])
def test_layout_validation_names_the_problem(layout, needle):
    with pytest.raises(InvalidDescriptorError, match=needle):
        layout.validate(64)


def test_whole_elements_is_a_class_choice():
    class Image(StridedLayout):
        axis_names = ("row", "column")
        whole_elements = True

    packed = StridedLayout((2, 3), (22, 6), np.dtype(np.float32), offset=2)
    assert packed.validate(64) is packed
    assert "byte 2" in packed.dlpack_problem
    assert "(22, 6)" in StridedLayout((2, 3), (22, 6), np.dtype(np.float32)).dlpack_problem
    with pytest.raises(InvalidDescriptorError, match="row stride 22 is not a multiple"):
        Image((2, 3), (22, 6), np.dtype(np.float32)).validate(64)


# --- generic publisher, frame, reader, view --------------------------------------------------------------------

def test_every_field_reads_back_through_its_view(published):
    _, msg = published
    assert (msg.height, msg.width, msg.row_step, msg.point_step) == (HEIGHT, WIDTH, LAYOUT.row_step, POINT_STEP)
    assert msg.core.byte_size == LAYOUT.padded_extent  # the last row's padding too
    with RecordReader().read(msg) as view:
        for name in FIELDS:
            field = view.array_view(LAYOUT.field(name), name)
            assert field.shape == (HEIGHT, WIDTH) and field.strides == (LAYOUT.row_step, POINT_STEP)
            np.testing.assert_array_equal(np.asarray(field), expected(name, HEIGHT, WIDTH))
            assert not np.asarray(field).flags.writeable
        xyz = np.asarray(view.array_view(LAYOUT.xyz(), "xyz"))
        np.testing.assert_array_equal(xyz[..., 2], expected("z", HEIGHT, WIDTH))


def test_aligned_fields_are_dlpack_views_of_the_same_memory(published):
    """In a 22-byte record only ``ring`` (uint16 at 16) is element-aligned."""
    _, msg = published
    with RecordReader().read(msg) as view:
        ring = view.array_view(LAYOUT.field("ring"), "ring")
        out = np.from_dlpack(ring)
        assert out.ctypes.data == view.handle.device_ptr + 16 and out.strides == (LAYOUT.row_step, POINT_STEP)
        np.testing.assert_array_equal(out, expected("ring", HEIGHT, WIDTH))


def test_unaligned_field_refuses_dlpack_by_name_and_copies_out(published):
    _, msg = published
    with RecordReader().read(msg) as view:
        time = view.array_view(LAYOUT.field("time"), "time")
        with pytest.raises(BufferError, match=r"time cannot be a DLPack view: it starts at byte 18"):
            np.from_dlpack(time)
        assert not hasattr(time, "__cuda_array_interface__")  # host memory: no CAI, as consumers expect
        dense = np.empty((HEIGHT, WIDTH), np.float32)
        view.copy_out(LAYOUT.field("time"), dense)
        np.testing.assert_array_equal(dense, expected("time", HEIGHT, WIDTH))
        columns = np.empty((WIDTH, HEIGHT), np.float32).T  # any destination strides
        view.copy_out(LAYOUT.field("time"), columns)
        np.testing.assert_array_equal(columns, expected("time", HEIGHT, WIDTH))
        with pytest.raises(ValueError, match="the given array is"):
            view.copy_out(LAYOUT.field("time"), np.empty((HEIGHT, WIDTH), np.float64))
        with pytest.raises(ValueError, match="read-only"):
            view.copy_out(LAYOUT.field("time"), np.asarray(view.array_view(LAYOUT.field("x"), "x")))


def test_field_views_and_their_capsules_keep_the_lease(published):
    pub, msg = published
    reader = RecordReader()
    view = reader.read(msg)
    field = view.array_view(LAYOUT.field("ring"), "ring")
    view.close()
    with pytest.raises(Ros2CudaIpcError, match="closed"):
        view.array_view(LAYOUT.field("y"), "y")
    assert reader.stats()["leases_held"] == 1
    consumer = np.from_dlpack(field)
    del field
    gc.collect()
    assert reader.stats()["leases_held"] == 1 and pub.pool.stats()["blocks_held_by_readers"] == 1
    np.testing.assert_array_equal(consumer, expected("ring", HEIGHT, WIDTH))
    del consumer
    gc.collect()
    assert reader.stats()["leases_held"] == 0 and pub.pool.stats()["blocks_held_by_readers"] == 0


def test_reuse_delay_zero_publishes_a_block_again_as_soon_as_its_reader_lets_go(node):
    with TypedPublisher(node, "typed_reuse", GpuPointCloud2, LAYOUT, memory="host", block_count=1,
                        reuse_delay=0) as pub:
        republish_once_released(pub, RecordReader())


def test_reuse_delay_defaults_to_the_pools(node):
    with TypedPublisher(node, "typed_default_reuse", GpuPointCloud2, LAYOUT, memory="host") as pub:
        assert pub.pool.reuse_delay == DEFAULT_REUSE_DELAY == 0.01


@pytest.mark.parametrize("delay", BAD_REUSE_DELAYS)
def test_a_negative_or_non_finite_reuse_delay_is_refused_at_construction(node, delay):
    with pytest.raises(ValueError, match="reuse_delay must be a finite number of seconds >= 0"):
        TypedPublisher(node, "typed_bad_reuse", GpuPointCloud2, LAYOUT, memory="host", reuse_delay=delay)


def test_each_publish_returns_its_own_message(node):
    """Messages are built ahead of their publish: a message returned earlier is never reused for a later one."""
    with TypedPublisher(node, "typed_own_messages", GpuPointCloud2, LAYOUT, memory="host", reuse_delay=0) as pub:
        sent, uids = [], []
        for _ in range(3):
            with pub.borrow() as frame:
                sent.append(frame.publish())
                uids.append(sent[-1].core.uid)
        assert len({id(msg) for msg in sent}) == len({id(msg.core) for msg in sent}) == 3
        assert [msg.core.uid for msg in sent] == uids and len(set(uids)) == 3  # untouched by the later publishes


def test_invalid_layout_is_refused_before_any_lease(published):
    pub, msg = published
    reader = RecordReader()
    bad = GpuPointCloud2(header=msg.header, core=msg.core, height=HEIGHT + 1, width=WIDTH, row_step=LAYOUT.row_step,
                         point_step=POINT_STEP)
    with pytest.raises(InvalidDescriptorError, match="outside"):
        reader.read(bad)
    assert reader.stats()["invalid_descriptors"] == 1 and reader.stats()["leases_held"] == 0
    assert pub.pool.stats()["blocks_held_by_readers"] == 0


def test_subscription_count_is_the_subscriptions_matched_with_the_publisher(node):
    with TypedPublisher(node, "typed_matched", GpuPointCloud2, LAYOUT, memory="host") as pub, spinning(node) as executor:
        assert pub.subscription_count == 0
        with received(node, GpuPointCloud2, "typed_matched"):
            assert spin_until(executor, lambda: pub.subscription_count == 1)
        assert spin_until(executor, lambda: pub.subscription_count == 0)


def test_publish_bytes_uploads_verbatim(node):
    layout = RecordLayout(2, 4, row_step=4 * POINT_STEP)
    data = np.arange(layout.padded_extent, dtype=np.uint8)
    with TypedPublisher(node, "typed_bytes", GpuPointCloud2, layout, memory="host") as pub:
        msg = pub.publish_bytes(data.tobytes())
        with RecordReader().read(msg) as view:
            raw = view.array_view(StridedLayout.contiguous((layout.padded_extent,), np.uint8), "raw")
            np.testing.assert_array_equal(np.asarray(raw), data)
        with pytest.raises(ValueError, match="do not fit"):
            pub.publish_bytes(bytes(pub.pool.block_size + 1))


# --- strided copies ----------------------------------------------------------------------------------------------

def test_copy_strided_host_field_with_row_padding_and_count():
    records = np.arange(4 * 64, dtype=np.uint8).reshape(4, 64)  # 4 rows of 5 x 12-byte records + 4 bytes padding
    out = np.zeros((4, 5, 2), np.uint32)
    copy_strided(out.ctypes.data, out.strides, records.ctypes.data + 4, (64, 12, 4), (4, 5, 2), 4)
    want = np.lib.stride_tricks.as_strided(records[:, 4:].view(np.uint8), (4, 5, 8), (64, 12, 1)).copy()
    np.testing.assert_array_equal(out.view(np.uint8).reshape(4, 5, 8), want)


def test_copy_rows_and_copy_strided_refuse_bad_geometry():
    a = np.zeros(64, np.uint8)
    with pytest.raises(ValueError, match="do not fit"):
        copy_rows(a.ctypes.data, 8, a.ctypes.data, 8, 16, 2)
    with pytest.raises(ValueError, match="differ in length"):
        copy_strided(a.ctypes.data, (8,), a.ctypes.data, (8, 1), (2,), 1)
    with pytest.raises(ValueError, match="overlap"):
        copy_strided(a.ctypes.data, (2,), a.ctypes.data, (8,), (4,), 4)
    with pytest.raises(ValueError, match="non-negative"):
        copy_strided(a.ctypes.data, (-8,), a.ctypes.data, (8,), (2,), 4)


# --- sources and streams -----------------------------------------------------------------------------------------

def test_strided_source_of_numpy_arrays():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    source = strided_source(base[:, ::2])
    assert source.address == base.ctypes.data and source.layout.strides == (24, 8) and not source.on_device
    assert not source.is_contiguous and strided_source(base).is_contiguous
    big = strided_source(np.arange(4, dtype=">u2"))
    assert big.layout.dtype == np.dtype("<u2")  # converted to this machine's order, one copy
    np.testing.assert_array_equal(big.owner, [0, 1, 2, 3])
    frozen = base.copy()
    frozen.flags.writeable = False
    assert strided_source(frozen).readonly


def test_stream_handles_of_each_kind():
    class Torch:
        cuda_stream = 11

    class Cupy:
        ptr = 12

    class CudaCore:
        handle = 13

    class Protocol:
        def __cuda_stream__(self):
            return (0, 14)

    assert [stream_handle(s) for s in (None, 10, Torch(), Cupy(), CudaCore(), Protocol())] == [0, 10, 11, 12, 13, 14]
    with pytest.raises(TypeError, match="cannot use"):
        stream_handle(object())
