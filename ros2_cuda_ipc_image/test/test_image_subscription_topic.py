"""An ImageSubscription on a topic of another type (a GpuTensor topic), or on a topic nobody publishes, says so
in one warning after a few seconds, naming the topic and what is there.  Real processes, real rclpy nodes."""

import subprocess
import sys

PUBLISHER = """
import time, rclpy
from ros2_cuda_ipc_tensor import TensorPublisher
rclpy.init()
node = rclpy.create_node("tensor_publisher")
tensors = TensorPublisher(node, "tensor_topic", shape=(1, 3, 8, 8), dtype="float32", memory="host")
print("ready", flush=True)
while True:
    rclpy.spin_once(node, timeout_sec=0.1)
"""

SUBSCRIBER = """
import time, rclpy
from ros2_cuda_ipc_image import ImageSubscription
rclpy.init()
node = rclpy.create_node("wrong_topic")
# The check looks 3 s after the subscription is made: made once discovery has found the publisher, so that what it
# says does not depend on how long discovery takes on a loaded machine (over 3 s, once, beside a full suite).
found = time.monotonic() + 30
while "/tensor_topic" not in dict(node.get_topic_names_and_types()) and time.monotonic() < found:
    rclpy.spin_once(node, timeout_sec=0.1)
on_tensors = ImageSubscription(node, "tensor_topic", lambda view: view.close())
on_nothing = ImageSubscription(node, "misspelt_topic", lambda view: view.close())
deadline = time.monotonic() + 6
while time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
print("done", flush=True)
"""


def test_a_typed_subscription_on_a_topic_of_another_type_or_of_none_says_so_once():
    publisher = subprocess.Popen([sys.executable, "-c", PUBLISHER], stdout=subprocess.PIPE, text=True)
    try:
        assert "ready" in publisher.stdout.readline()
        out = subprocess.run([sys.executable, "-c", SUBSCRIBER], capture_output=True, text=True, timeout=60)
    finally:
        publisher.kill()
        publisher.wait()
    assert out.returncode == 0 and "done" in out.stdout, out.stderr
    lines = [line for line in out.stderr.splitlines() if "_topic" in line and "WARN" in line]
    wrong = [line for line in lines if "/tensor_topic: published as ros2_cuda_ipc_msgs/msg/GpuTensor, not "
             "ros2_cuda_ipc_msgs/msg/GpuImage" in line]
    missing = [line for line in lines if "/misspelt_topic: no publisher" in line]
    assert len(wrong) == 1 and len(missing) == 1, out.stderr
