"""check_topic: a topic that brings nothing is named once, with what the graph has there (nothing, another type)."""

import time

import pytest
import rclpy
from std_msgs.msg import String

from ros2_cuda_ipc_core import check_topic, message_type_name
from ros2_cuda_ipc_msgs.msg import GpuImage

GPU_IMAGE = "ros2_cuda_ipc_msgs/msg/GpuImage"


def looked(node, check, timeout: float = 15.0) -> None:
    """Spin until ``check`` has looked at the graph (its timer fired)."""
    deadline = time.monotonic() + timeout
    while check._timer is not None and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    assert check._timer is None, "the check never looked"


@pytest.fixture(scope="module")
def publishers(node):
    """Another type on /topic_check/other, the expected one on /topic_check/image; discovered by ``node``."""
    made = [node.create_publisher(String, "/topic_check/other", 1), node.create_publisher(GpuImage, "/topic_check/image", 1)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (node.count_publishers("/topic_check/other")
                                               and node.count_publishers("/topic_check/image")):
        rclpy.spin_once(node, timeout_sec=0.05)
    yield
    for publisher in made:
        node.destroy_publisher(publisher)


def test_a_topic_of_another_type_is_named_with_its_type(node, publishers):
    check = check_topic(node, "/topic_check/other", GpuImage, delay=0.2)
    looked(node, check)
    assert check.found == (f"/topic_check/other: published as std_msgs/msg/String, not {GPU_IMAGE} (after 0.2 s): "
                           "none of its messages can arrive here")


def test_a_misspelt_topic_says_it_has_no_publisher_and_where_the_type_is(node, publishers):
    check = check_topic(node, "topic_check/imag", [GPU_IMAGE], delay=0.2)  # relative: resolved in the node's namespace
    looked(node, check)
    assert check.found == (f"/topic_check/imag: no publisher (after 0.2 s); {GPU_IMAGE} is published on /topic_check/image"
                           "; did you mean /topic_check/image?")


def test_a_type_nobody_publishes_is_said_so(node, publishers):
    check = check_topic(node, "/topic_check/nowhere", "sensor_msgs/CameraInfo", delay=0.2)
    looked(node, check)
    assert check.found == ("/topic_check/nowhere: no publisher (after 0.2 s); nothing publishes "
                           "sensor_msgs/msg/CameraInfo")


def test_a_topic_with_a_publisher_of_the_type_says_nothing(node, publishers):
    check = check_topic(node, "/topic_check/image", ["sensor_msgs/msg/Image", GpuImage], delay=0.2)
    looked(node, check)
    assert check.found is None


def test_cancelled_when_a_message_came_it_never_looks(node):
    check = check_topic(node, "/topic_check/silent", GpuImage, delay=0.2)
    check.cancel()
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    assert check.found is None and check._timer is None


def test_type_names_as_the_graph_spells_them():
    assert message_type_name(GpuImage) == GPU_IMAGE and message_type_name(String) == "std_msgs/msg/String"
    assert message_type_name("std_msgs/String") == message_type_name("std_msgs/msg/String") == "std_msgs/msg/String"
    with pytest.raises(ValueError, match="needs the message type"):
        check_topic(None, "image", [])
