"""Real processes for test_image_multiprocess.py: an ImagePublisher and an ImageReader, over DDS."""

import numpy as np
from ack_flow import publish_acknowledged, receive_acknowledged
from peers import peer_node, play

from ros2_cuda_ipc_image import ImagePublisher, ImageReader
from ros2_cuda_ipc_msgs.msg import GpuImage

HEIGHT, WIDTH = 720, 1280
ROW_ALIGNMENT = 4096  # 3840-byte rows padded to 4096
TOPIC = "image_test_frames"


def base_pattern() -> np.ndarray:
    rows, cols, chans = np.ogrid[:HEIGHT, :WIDTH, :3]
    return ((rows * 7 + cols * 3 + chans) % 256).astype(np.uint8)


def publisher(count: str) -> dict:
    base = base_pattern()
    with peer_node("image_test_publisher") as node, \
            ImagePublisher(node, TOPIC, width=WIDTH, height=HEIGHT, encoding="bgr8", row_alignment=ROW_ALIGNMENT,
                           memory="host", block_count=4, qos=100, reuse_delay=0) as pub:
        def publish(seq: int) -> None:
            with pub.borrow(timeout=5.0) as frame:
                np.add(base, np.uint8(seq % 256), out=frame.array)
                frame.publish()

        publish_acknowledged(node, TOPIC, int(count), pub.pool.block_count, publish, lambda: pub.subscription_count)
        return {"stats": pub.pool.stats(), "strides": list(pub.layout.strides)}


def subscriber(count: str) -> dict:
    images = ImageReader()
    base = base_pattern()
    strides: list[int] = []

    def check(msg: GpuImage, seq: int) -> list[str]:
        with images.read(msg) as view:
            strides[:] = view.strides
            expected = base + np.uint8(seq % 256)
            if view.shape != (HEIGHT, WIDTH, 3) or not np.array_equal(view.array, expected):
                return [f"frame {seq}: {int((view.array != expected).sum())} wrong values"]
        return []

    with peer_node("image_test_subscriber") as node:
        result = receive_acknowledged(node, TOPIC, GpuImage, int(count), images.reader, check, item="frame")
    return {**result, "strides": strides or None}


if __name__ == "__main__":
    play({"publisher": publisher, "subscriber": subscriber})
