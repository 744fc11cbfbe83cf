"""run_nodes: a stop that lands while the nodes are being made is a clean stop; a real error is not hidden."""

import pytest
import rclpy
from std_msgs.msg import String

from ros2_cuda_ipc_core import run_nodes


def test_a_stop_while_the_nodes_are_made_ends_with_0():
    def make_nodes():
        node = rclpy.create_node("half_made")
        rclpy.try_shutdown()  # what SIGINT / SIGTERM do to the context, here between two rcl calls
        node.create_publisher(String, "never", 10)  # fails: the context is no longer valid
        return [node]

    assert run_nodes(make_nodes) == 0
    assert not rclpy.ok()


def test_an_error_while_the_nodes_are_made_is_raised():
    def make_nodes():
        raise RuntimeError("a bad parameter")

    with pytest.raises(RuntimeError, match="a bad parameter"):
        run_nodes(make_nodes)
    assert not rclpy.ok()
