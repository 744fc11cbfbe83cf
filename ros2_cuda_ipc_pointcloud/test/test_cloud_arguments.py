"""The point cloud API's wrong arguments: the typed layer's shared checks, as for images (test_image_arguments)."""

from __future__ import annotations

import pytest

from ros2_cuda_ipc_core import CudaUnavailableError
from ros2_cuda_ipc_core.memory.cuda_driver import unavailable_reason
from ros2_cuda_ipc_msgs.msg import GpuImage
from ros2_cuda_ipc_pointcloud import PointCloudPublisher, PointCloudReader, PointCloudSubscription


@pytest.mark.parametrize(("changes", "error", "message"), [
    ({"width": "1024"}, TypeError, "width must be an int, not str ('1024')"),
    ({"height": 1.0}, TypeError, "height must be an int, not float (1.0)"),
    ({"point_step": "16"}, TypeError, "point_step must be an int, not str ('16')"),
    ({"block_count": 2.5}, TypeError, "block_count must be an int, not float (2.5)"),
    ({"width": 0}, ValueError, "width=0 must be positive (width x height points is the capacity)"),
])
def test_a_wrong_argument_is_one_error_naming_it(node, changes, error, message) -> None:
    with pytest.raises(error) as raised:
        PointCloudPublisher(node, "arguments_cloud", **{"fields": "xyzi", "width": 1024, "memory": "host", **changes})
    assert str(raised.value) == message


def test_reading_an_image_message_names_both_types() -> None:
    with pytest.raises(TypeError, match=r"^PointCloudReader.read: wrong message type: expected GpuPointCloud2, "
                                        r"got GpuImage$"):
        PointCloudReader().read(GpuImage())


def test_a_subscription_asking_for_cuda_without_cuda_raises_at_once(node) -> None:
    if unavailable_reason() is None:  # CUDA here: accepted
        PointCloudSubscription(node, "arguments_cloud", lambda view: None, memory="cuda").close()
        return
    with pytest.raises(CudaUnavailableError, match="CUDA"):
        PointCloudSubscription(node, "arguments_cloud", lambda view: None, memory="cuda")
