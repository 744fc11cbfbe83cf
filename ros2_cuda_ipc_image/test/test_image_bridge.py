"""sensor_msgs/Image -> publish_image_msg -> read -> to_image_msg is bit-identical, for every encoding."""

import array

import numpy as np
import pytest
from gpu_marks import MEMORIES
from sensor_msgs.msg import Image
from setters import checking, values_given_to_setter

from ros2_cuda_ipc_image import ENCODINGS, ImagePublisher, ImageReader, publish_image_msg, to_image_msg


def random_image(encoding: str, rng, height=5, width=7) -> Image:
    dtype, channels = ENCODINGS[encoding]
    padding = 3 * dtype.itemsize  # row padding in whole elements, as the validation requires
    msg = Image()
    msg.header.frame_id = f"cam_{encoding}"
    msg.header.stamp.sec = 42
    msg.height, msg.width, msg.encoding = height, width, encoding
    msg.step = width * channels * dtype.itemsize + padding
    msg.is_bigendian = 0
    msg.data = rng.integers(0, 256, size=height * msg.step, dtype=np.uint8).tobytes()
    return msg


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_roundtrip_is_bit_identical(node, encoding):
    rng = np.random.default_rng(abs(hash(encoding)) % 2**32)
    original = random_image(encoding, rng)
    with ImagePublisher(node, f"bridge_{encoding}", width=original.width, height=original.height, encoding=encoding,
                        row_stride=original.step, memory="host") as pub:
        gpu_msg = publish_image_msg(pub, original)
        with ImageReader().read(gpu_msg) as view:
            back = to_image_msg(view)
    assert (back.height, back.width, back.encoding, back.step) == (original.height, original.width, encoding, original.step)
    assert bytes(back.data) == bytes(original.data)
    assert back.header.frame_id == original.header.frame_id and back.header.stamp.sec == 42
    assert back.is_bigendian == 0


def test_big_endian_input_is_swapped_to_native(node):
    values = np.arange(12, dtype=np.uint16).reshape(3, 4)
    msg = Image(height=3, width=4, encoding="mono16", step=8, is_bigendian=1)
    msg.data = values.astype(">u2").tobytes()
    with ImagePublisher(node, "bridge_be", width=4, height=3, encoding="mono16", memory="host") as pub, \
            ImageReader().read(publish_image_msg(pub, msg)) as view:
        np.testing.assert_array_equal(view.array[..., 0], values)


def test_short_data_is_refused(node):
    from ros2_cuda_ipc_core import InvalidDescriptorError

    msg = Image(height=3, width=4, encoding="mono8", step=4)
    msg.data = bytes(11)
    with ImagePublisher(node, "bridge_short", width=4, height=3, encoding="mono8", memory="host") as pub, \
            pytest.raises(InvalidDescriptorError, match=r"12|rows"):
        publish_image_msg(pub, msg)


def test_publish_array_copies_once_and_checks_shape(node):
    with ImagePublisher(node, "bridge_array", width=6, height=4, encoding="bgr8", row_alignment=64, memory="host") as pub:
        image = np.random.default_rng(1).integers(0, 256, size=(4, 6, 3), dtype=np.uint8)
        msg = pub.publish_array(image)
        with ImageReader().read(msg) as view:
            np.testing.assert_array_equal(view.array, image)
            assert view.strides == (64, 3, 1)
        with pytest.raises(ValueError, match="this publisher sends"):
            pub.publish_array(np.zeros((4, 5, 3), np.uint8))




def padded_image(encoding: str, width: int, height: int, padding: int) -> tuple[Image, np.ndarray]:
    """A random image whose rows carry ``padding`` extra bytes, and its pixels."""
    dtype, channels = ENCODINGS[encoding]
    pixels = np.random.default_rng(5).integers(0, 256, size=(height, width * channels * dtype.itemsize), dtype=np.uint8)
    msg = Image(height=height, width=width, encoding=encoding, step=pixels.shape[1] + padding)
    msg.header.frame_id = "padded"
    msg.data = array.array("B", np.pad(pixels, ((0, 0), (0, padding)), constant_values=0xEE).tobytes())
    return msg, pixels


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("encoding", ["rgba8", "mono16", "16SC2", "64FC1"])
def test_padded_image_of_the_publishers_geometry_is_repacked_to_its_stride(node, encoding, memory):
    with ImagePublisher(node, f"bridge_repack_{encoding}", width=53, height=37, encoding=encoding, memory=memory) as pub:
        # Rows padded so that the image overflows a block (pages on host memory, 2 MiB on CUDA), in whole elements.
        overflow = -(-(pub.pool.block_size + 1) // 37) - 53 * pub.layout.strides[1]
        msg, pixels = padded_image(encoding, width=53, height=37, padding=-(-max(24, overflow) // 8) * 8)
        assert len(msg.data) > pub.pool.block_size  # the padded rows would not fit a block
        sent = publish_image_msg(pub, msg)
        assert sent is not None and list(sent.strides) == list(pub.layout.strides)
        assert sent.encoding == encoding and sent.header.frame_id == "padded"
        with ImageReader().read(sent) as view:
            back = to_image_msg(view)
    assert back.step == pixels.shape[1]
    np.testing.assert_array_equal(np.frombuffer(back.data, np.uint8).reshape(pixels.shape), pixels)


def test_padded_image_that_fits_keeps_its_step(node):
    msg, _ = padded_image("rgba8", width=53, height=37, padding=24)
    with ImagePublisher(node, "bridge_keep_step", width=53, height=37, encoding="rgba8", row_alignment=512,
                        memory="host") as pub, ImageReader().read(publish_image_msg(pub, msg)) as view:
        assert view.strides[0] == msg.step
        back = to_image_msg(view)
    assert back.step == msg.step and bytes(back.data) == bytes(msg.data)


def test_image_too_big_for_the_publisher_and_of_another_geometry_is_refused(node):
    msg, _ = padded_image("rgba8", width=60, height=37, padding=24)
    with ImagePublisher(node, "bridge_other_geometry", width=53, height=37, encoding="rgba8", memory="host") as pub, \
            pytest.raises(ValueError, match=r"60x37 rgba8 image with step 264 \(9768 bytes\) does not fit .* not its 53x37"):
        publish_image_msg(pub, msg)


def test_to_image_msg_gives_data_in_the_type_checking_setters_keep_as_is(node):
    """Humble's setters, and Jazzy's with ROS_PYTHON_CHECK_FIELDS=1, check any other value byte by byte."""
    with ImagePublisher(node, "bridge_fast", width=64, height=48, encoding="rgb8", memory="host") as pub:
        frame = pub.borrow()
        frame.array[...] = 9
        with ImageReader().read(frame.publish()) as view:
            msg, given = values_given_to_setter("data", lambda: to_image_msg(view))
    assert given and all(isinstance(v, array.array) and v.typecode == "B" for v in given), given  # Image() too
    assert len(msg.data) == 48 * 64 * 3 and set(msg.data) == {9}
    checked = checking(Image)
    checked.data = given[-1]
    assert checked.data is given[-1]  # the setter's fast path: no look at each byte, no copy
