"""Real publishers for the viewer's tests: one known image or point cloud, published again and again until stopped.

    viewer_peer.py image ENCODING WIDTH HEIGHT MEMORY TOPIC [FPS]
    viewer_peer.py cloud LAYOUT MEMORY TOPIC

(20 frames a second unless FPS says otherwise), each stamped when it is published.

The test compares what the viewer drew with :func:`image_pattern` / :data:`CLOUD_POINTS`.
"""

import signal
import time

import numpy as np
from peers import peer_node, play
from std_msgs.msg import Header

from ros2_cuda_ipc_image import ImagePublisher, encoding_layout

#: Points a cloud test draws: the camera's target (the origin) and three around it, 2 m away.
CLOUD_POINTS = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]], dtype=np.float32)


def image_pattern(encoding: str, width: int, height: int) -> np.ndarray:
    """A frame whose every pixel differs from its neighbours, (height, width, channels) of the encoding's type."""
    dtype, channels = encoding_layout(encoding)
    rows, cols, chans = np.ogrid[:height, :width, :channels]
    if dtype == np.uint8:
        return ((rows * 7 + cols * 3 + chans * 50) % 256).astype(np.uint8)
    if dtype == np.uint16:
        return ((rows * 911 + cols * 257) % 65536).astype(np.uint16) + np.zeros(chans.shape, np.uint16)
    return ((rows * width + cols) / (width * height) + np.zeros(chans.shape)).astype(dtype)


def _run_until_stopped(publish, fps: float = 20.0) -> dict:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    sent, deadline, period = 0, time.monotonic() + 120, 1.0 / fps
    next_frame = time.monotonic()
    try:
        while not stop and time.monotonic() < deadline:
            sent += publish()
            next_frame += period
            time.sleep(max(0.0, next_frame - time.monotonic()))
    except KeyboardInterrupt:
        pass
    return {"sent": sent}


def image(encoding: str, width: str, height: str, memory: str, topic: str, fps: str = "20") -> dict:
    frame_data = image_pattern(encoding, int(width), int(height))
    with peer_node("viewer_test_camera") as node, \
            ImagePublisher(node, topic, width=int(width), height=int(height), encoding=encoding, memory=memory,
                           row_alignment=256, reuse_delay=0) as pub:
        def publish() -> int:
            return int(pub.publish_array(frame_data, header=Header(stamp=node.get_clock().now().to_msg())) is not None)

        return _run_until_stopped(publish, float(fps))


def cloud(layout: str, memory: str, topic: str) -> dict:
    from ros2_cuda_ipc_pointcloud import NAMED_LAYOUTS, PointCloudPublisher

    fields, point_step = NAMED_LAYOUTS[layout]
    with peer_node("viewer_test_lidar") as node, \
            PointCloudPublisher(node, topic, fields=fields, width=len(CLOUD_POINTS), point_step=point_step,
                                memory=memory, reuse_delay=0) as pub:
        points = np.zeros(len(CLOUD_POINTS), dtype=pub.layout.dtype)
        for axis, name in enumerate("xyz"):
            points[name] = CLOUD_POINTS[:, axis]
        if "intensity" in points.dtype.names:
            points["intensity"] = np.arange(len(CLOUD_POINTS), dtype=np.float32)

        def publish() -> int:
            return int(pub.publish_array(points, header=Header(stamp=node.get_clock().now().to_msg())) is not None)

        return _run_until_stopped(publish)


if __name__ == "__main__":
    play({"image": image, "cloud": cloud})
