"""Invalid image metadata is refused before a lease is taken, naming what is wrong; planar layouts pass."""

import numpy as np
import pytest
from block_reuse import BAD_REUSE_DELAYS, republish_once_released

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_image import ImagePublisher, ImageReader
from ros2_cuda_ipc_msgs.msg import GpuImage


@pytest.fixture(scope="module")
def published(node):
    pub = ImagePublisher(node, "layout_test", width=64, height=32, encoding="rgb8", row_alignment=256, memory="host")
    frame = pub.borrow()
    frame.array[:] = np.arange(32 * 64 * 3, dtype=np.uint32).reshape(32, 64, 3) % 251
    msg = frame.publish()
    yield pub, msg
    pub.close()


def altered(msg: GpuImage, **changes) -> GpuImage:
    out = GpuImage()
    out.header, out.core = msg.header, msg.core
    out.dtype, out.encoding = changes.get("dtype", msg.dtype), changes.get("encoding", msg.encoding)
    out.shape = np.array(changes.get("shape", msg.shape), dtype=np.uint32)
    out.strides = np.array(changes.get("strides", msg.strides), dtype=np.uint64)
    return out


def test_valid_message_reads_with_its_layout(published):
    _, msg = published
    assert list(msg.shape) == [32, 64, 3] and list(msg.strides) == [256, 3, 1]
    with ImageReader().read(msg) as view:
        assert view.shape == (32, 64, 3) and view.strides == (256, 3, 1) and view.encoding == "rgb8"
        assert view.array[31, 63, 2] == (31 * 64 * 3 + 63 * 3 + 2) % 251
        assert not view.array.flags.writeable


@pytest.mark.parametrize("change,needle", [
    ({"shape": [0, 64, 3]}, "zero extent"),
    ({"dtype": 9}, "dtype code"),
    ({"strides": [256, 3, 3], "dtype": GpuImage.DTYPE_U16, "encoding": ""}, "multiple"),
    ({"strides": [256, 1, 1]}, "overlap"),
    ({"strides": [0, 3, 1]}, "overlap"),
    ({"shape": [33, 64, 3]}, "outside"),
    ({"strides": [2**63, 3, 1]}, "outside"),
    ({"encoding": "mono16"}, "mono16"),
    ({"encoding": "not_an_encoding"}, "fixed element type"),
])
def test_each_invalid_field_raises_and_takes_no_lease(published, change, needle):
    pub, msg = published
    reader = ImageReader()
    with pytest.raises(InvalidDescriptorError, match=needle):
        reader.read(altered(msg, **change))
    assert reader.stats()["leases_held"] == 0 and reader.stats()["reads"] == 0
    assert reader.stats()["invalid_descriptors"] == 1
    assert pub.pool.stats()["blocks_held_by_readers"] == 0


def test_planar_layout_is_exported_without_a_copy(node):
    with ImagePublisher(node, "planar_test", width=8, height=4, dtype=np.float32, channels=3, memory="host") as pub:
        frame = pub.borrow()
        planes = np.arange(3 * 4 * 8, dtype=np.float32).reshape(3, 4, 8)
        frame.array[...] = 0
        block = pub.pool  # write channel-first into the block's bytes, then describe it with strides
        raw = frame.block.view((3, 4, 8), np.float32)
        raw[...] = planes
        from ros2_cuda_ipc_image.layout import ImageLayout

        planar = ImageLayout((4, 8, 3), (8 * 4, 4, 4 * 8 * 4), np.dtype(np.float32), "32FC3")
        msg = pub.publish_block(frame.block, planar)
        with ImageReader().read(msg) as view:
            assert view.strides == (32, 4, 128)
            np.testing.assert_array_equal(view.array, planes.transpose(1, 2, 0))
            assert view.array.ctypes.data == view.handle.device_ptr  # no copy
        assert block.stats()["published"] == 1


def test_each_message_carries_its_own_layout_whatever_the_spare_was_filled_with(node):
    """The publisher builds its next message ahead with its layout's fields written; a message of another layout,
    or one after ``layout`` was replaced, is written whole."""
    from ros2_cuda_ipc_image.layout import ImageLayout

    with ImagePublisher(node, "spare_layouts", width=8, height=4, encoding="rgb8", memory="host",
                        block_count=8) as pub:
        default = pub.layout
        other = ImageLayout((2, 8, 3), (24, 3, 1), np.dtype(np.uint8), "bgr8")
        layouts = []
        for layout in (None, other, None, None):
            with pub.borrow() as frame:
                msg = pub.publish_block(frame.block, layout)
            layouts.append(ImageLayout.from_message(msg))
        pub.layout = other
        with pub.borrow() as frame:
            layouts.append(ImageLayout.from_message(frame.publish()))
    assert layouts == [default, other, default, default, other]


def test_publisher_arguments_are_checked(node):
    with pytest.raises(ValueError, match="encoding"):
        ImagePublisher(node, "bad", width=4, height=4)
    with pytest.raises(InvalidDescriptorError):
        ImagePublisher(node, "bad", width=4, height=4, encoding="rgb8", channels=4)
    with pytest.raises(ValueError, match="row_stride"):
        ImagePublisher(node, "bad", width=4, height=4, encoding="rgb8", row_stride=11)


@pytest.mark.parametrize("delay", BAD_REUSE_DELAYS)
def test_a_negative_or_non_finite_reuse_delay_is_refused(node, delay):
    with pytest.raises(ValueError, match="reuse_delay must be a finite number of seconds >= 0"):
        ImagePublisher(node, "bad", width=4, height=4, encoding="rgb8", memory="host", reuse_delay=delay)


def test_reuse_delay_zero_publishes_a_block_again_as_soon_as_its_reader_lets_go(node):
    with ImagePublisher(node, "image_reuse", width=8, height=4, encoding="rgb8", memory="host", block_count=1,
                        reuse_delay=0) as pub:
        republish_once_released(pub, ImageReader())
