"""A real rclpy process for test_dds: 'send' publishes GpuImage messages, 'receive' prints what arrives."""

import json
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy

from ros2_cuda_ipc_msgs.msg import GpuImage

QOS = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)


def sample() -> GpuImage:
    msg = GpuImage()
    msg.header.frame_id = "cam0"
    msg.header.stamp.sec = 1234
    msg.dtype = GpuImage.DTYPE_U16
    msg.shape = np.array([480, 640, 1], dtype=np.uint32)
    msg.strides = np.array([1280, 2, 2], dtype=np.uint64)
    msg.encoding = "mono16"
    msg.core.socket_path = "@ros2_cuda_ipc/test"
    msg.core.pool_id = np.arange(16, dtype=np.uint8)
    msg.core.block_id, msg.core.uid, msg.core.publisher_pid = 2, 99, 1000
    msg.core.memory, msg.core.device_id, msg.core.byte_size = 1, 1, 614400
    msg.core.event_handle = np.full(64, 0xAB, dtype=np.uint8)
    return msg


def as_dict(msg: GpuImage) -> dict:
    core = msg.core
    return {
        "frame_id": msg.header.frame_id, "sec": msg.header.stamp.sec, "dtype": msg.dtype,
        "shape": [int(x) for x in msg.shape], "strides": [int(x) for x in msg.strides], "encoding": msg.encoding,
        "socket_path": core.socket_path, "pool_id": bytes(core.pool_id).hex(), "block_id": core.block_id,
        "uid": core.uid, "publisher_pid": core.publisher_pid, "memory": core.memory, "device_id": core.device_id,
        "event_handle": bytes(core.event_handle).hex(), "byte_size": core.byte_size,
    }


def main(role: str, topic: str) -> None:
    rclpy.init()
    node = rclpy.create_node(f"gpu_image_{role}")
    if role == "send":
        pub = node.create_publisher(GpuImage, topic, QOS)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pub.publish(sample())
            rclpy.spin_once(node, timeout_sec=0.1)
    else:
        got = []
        node.create_subscription(GpuImage, topic, got.append, QOS)
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        print(json.dumps(as_dict(got[0]) if got else None), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
