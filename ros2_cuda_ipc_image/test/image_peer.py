"""Real processes for test_image_multiprocess.py: an ImagePublisher and an ImageReader, over DDS."""

import json
import sys

import numpy as np
import rclpy
from ack_flow import Acker, AckGate

from ros2_cuda_ipc_image import ImagePublisher, ImageReader
from ros2_cuda_ipc_msgs.msg import GpuImage

HEIGHT, WIDTH = 720, 1280
ROW_ALIGNMENT = 4096  # 3840-byte rows padded to 4096


def base_pattern() -> np.ndarray:
    rows, cols, chans = np.ogrid[:HEIGHT, :WIDTH, :3]
    return ((rows * 7 + cols * 3 + chans) % 256).astype(np.uint8)


def publisher(count: int) -> None:
    rclpy.init()
    node = rclpy.create_node("image_test_publisher")
    gate = AckGate(node, "image_test_acks")
    pub = ImagePublisher(node, "image_test_frames", width=WIDTH, height=HEIGHT, encoding="bgr8",
                         row_alignment=ROW_ALIGNMENT, memory="host", block_count=4, qos=100, reuse_delay=0)
    base = base_pattern()
    if not gate.wait_for_subscribers(1):
        raise SystemExit("the reader did not appear within 60 s (DDS discovery)")
    for seq in range(count):
        gate.wait_until_within(seq, pub.pool.block_count)
        frame = pub.borrow(timeout=5.0)
        with frame:
            np.add(base, np.uint8(seq % 256), out=frame.array)
            frame.publish()
    gate.wait_until_within(count - 1, 0, timeout=60)
    print(json.dumps({"stats": pub.pool.stats(), "strides": list(pub.layout.strides)}), flush=True)
    pub.close()
    node.destroy_node()
    rclpy.shutdown()


def subscriber(count: int) -> None:
    rclpy.init()
    node = rclpy.create_node("image_test_subscriber")
    images = ImageReader()
    acker = Acker(node, "image_test_acks", "reader", images.reader)
    base = base_pattern()
    result = {"verified": 0, "errors": [], "strides": None}
    seen = [0]

    def on_frame(msg: GpuImage) -> None:
        seq = seen[0]
        try:
            with images.read(msg) as view:
                result["strides"] = list(view.strides)
                expected = base + np.uint8(seq % 256)
                if view.shape != (HEIGHT, WIDTH, 3) or not np.array_equal(view.array, expected):
                    result["errors"].append(f"frame {seq}: {int((view.array != expected).sum())} wrong values")
                else:
                    result["verified"] += 1
        except Exception as exc:
            result["errors"].append(f"frame {seq}: {type(exc).__name__}: {exc}")
        acker.ack(seq)
        seen[0] += 1

    node.create_subscription(GpuImage, "image_test_frames", on_frame, 100)
    acker.spin_until_received(node, lambda: seen[0], count)
    print(json.dumps(result), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    {"publisher": publisher, "subscriber": subscriber}[sys.argv[1]](int(sys.argv[2]))
