"""A wrong argument to the image API is one clear error naming it, on a real node.

Before: ``ImagePublisher(width="640")`` raised ``'<=' not supported between instances of 'str' and 'int'``;
``ImageReader().read(GpuTensor())`` complained that "shape () and strides () must have 3 entries each";
``ImageSubscription(memory="cuda")`` without CUDA was accepted and failed frame by frame later, while the
publishers raise at once.  The checks are the typed layer's (``ros2_cuda_ipc_core.typed.checks``), shared by the
point cloud and tensor packages.
"""

from __future__ import annotations

import numpy as np
import pytest

from ros2_cuda_ipc_core import CudaUnavailableError, InvalidDescriptorError
from ros2_cuda_ipc_core.memory.cuda_driver import unavailable_reason
from ros2_cuda_ipc_image import ImagePublisher, ImageReader, ImageSubscription
from ros2_cuda_ipc_msgs.msg import GpuImage, GpuPointCloud2, GpuTensor

WRONG_TYPES = [
    ({"width": "640"}, "width must be an int, not str ('640')"),
    ({"height": 480.0}, "height must be an int, not float (480.0)"),
    ({"width": True}, "width must be an int, not bool (True)"),
    ({"block_count": "4"}, "block_count must be an int, not str ('4')"),
    ({"row_stride": "1920"}, "row_stride must be an int, not str ('1920')"),
    ({"row_alignment": None}, "row_alignment must be an int, not NoneType (None)"),
    ({"device": "0"}, "device must be an int, not str ('0')"),
    ({"jpeg_quality": "80"}, "jpeg_quality must be an int, not str ('80')"),
]
WRONG_VALUES = [
    ({"width": 0}, "width=0 must be positive"),
    ({"height": -480}, "height=-480 must be positive"),
    ({"block_count": 0}, "block_count=0 must be positive"),
    ({"device": -1}, "device=-1 must be 0 or above"),
]


def _publisher(node, **changes):
    return ImagePublisher(node, "arguments_image", **{"width": 64, "height": 48, "encoding": "rgb8", "memory": "host",
                                                      **changes})


@pytest.mark.parametrize(("changes", "message"), WRONG_TYPES)
def test_an_argument_of_the_wrong_type_is_a_type_error_naming_it(node, changes, message) -> None:
    with pytest.raises(TypeError) as raised:
        _publisher(node, **changes)
    assert str(raised.value) == message


@pytest.mark.parametrize(("changes", "message"), WRONG_VALUES)
def test_an_argument_out_of_range_is_a_value_error_naming_it(node, changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        _publisher(node, **changes)


def test_numpy_integers_are_ints(node) -> None:
    with _publisher(node, width=np.int64(64), height=np.uint16(48)) as publisher:
        assert publisher.layout.shape[:2] == (48, 64)


@pytest.mark.parametrize("message", [GpuTensor(), GpuPointCloud2(), "a string"])
def test_reading_another_message_type_names_both_types(message) -> None:
    reader = ImageReader()
    with pytest.raises(TypeError) as raised:
        reader.read(message)
    assert str(raised.value) == f"ImageReader.read: wrong message type: expected GpuImage, got {type(message).__name__}"
    assert reader.stats().get("invalid_descriptors", 0) == 0  # a caller's mistake, not a forged descriptor


def test_a_subscription_landing_frames_in_cuda_without_cuda_raises_at_once_like_a_publisher(node) -> None:
    if unavailable_reason() is None:  # CUDA here: accepted, as a publisher's CUDA pool is made
        ImageSubscription(node, "arguments_image", lambda view: None, memory="cuda").close()
        return
    with pytest.raises(CudaUnavailableError) as publisher_error:
        _publisher(node, memory="cuda")
    with pytest.raises(CudaUnavailableError) as subscription_error:
        ImageSubscription(node, "arguments_image", lambda view: None, memory="cuda")
    assert str(subscription_error.value) == str(publisher_error.value) == unavailable_reason()
    assert not node.get_subscriptions_info_by_topic("/arguments_image")  # nothing was made


def test_a_subscription_with_memory_host_or_auto_is_made(node) -> None:
    for memory in ("host", "auto"):
        ImageSubscription(node, "arguments_image", lambda view: None, memory=memory).close()


def test_the_right_message_type_still_reaches_the_layout_checks() -> None:
    with pytest.raises(InvalidDescriptorError, match="shape"):  # an empty GpuImage: its layout is refused, as before
        ImageReader().read(GpuImage())
