"""The tensor API's wrong arguments: the typed layer's shared checks, as for images (test_image_arguments).

Before: ``shape=("4", 3)`` and ``shape=(4.0, 3)`` were taken as ``(4, 3)``."""

from __future__ import annotations

import pytest

from ros2_cuda_ipc_msgs.msg import GpuImage
from ros2_cuda_ipc_tensor import TensorPublisher, TensorReader


@pytest.mark.parametrize(("changes", "error", "message"), [
    ({"shape": ("4", 3)}, TypeError, "shape[0] must be an int, not str ('4')"),
    ({"shape": (4, 3.0)}, TypeError, "shape[1] must be an int, not float (3.0)"),
    ({"shape": "43"}, TypeError, "shape must be a sequence of ints, not str ('43')"),
    ({"strides": (1, "4")}, TypeError, "strides[1] must be an int, not str ('4')"),
    ({"block_count": "4"}, TypeError, "block_count must be an int, not str ('4')"),
    ({"block_count": 0}, ValueError, "block_count=0 must be positive"),
])
def test_a_wrong_argument_is_one_error_naming_it(node, changes, error, message) -> None:
    with pytest.raises(error) as raised:
        TensorPublisher(node, "arguments_tensor", **{"shape": (4, 3), "dtype": "float32", "memory": "host", **changes})
    assert str(raised.value) == message


def test_reading_an_image_message_names_both_types() -> None:
    with pytest.raises(TypeError, match=r"^TensorReader.read: wrong message type: expected GpuTensor, got GpuImage$"):
        TensorReader().read(GpuImage())
