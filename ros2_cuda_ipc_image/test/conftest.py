import pytest
import rclpy


@pytest.fixture(scope="module")
def node():
    rclpy.init()
    node = rclpy.create_node("ros2_cuda_ipc_image_test")
    yield node
    node.destroy_node()
    rclpy.shutdown()
