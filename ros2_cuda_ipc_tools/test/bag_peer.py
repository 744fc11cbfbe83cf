"""Real processes for test_bag.py: a camera and an Ouster-layout LiDAR publishing into host (or CUDA) pools, and a
subscriber that checks every frame bag_play replays.  Frame ``i`` has stamp ``(1000 + i, i)`` and bytes drawn
from a generator seeded with ``i``, so a bag's contents can be checked without keeping the frames."""

import json
import sys
import time

import numpy as np
from peers import peer_node, play

from ros2_cuda_ipc_core import Ros2CudaIpcError, StaleDescriptorError
from ros2_cuda_ipc_image import ImagePublisher, ImageReader
from ros2_cuda_ipc_msgs.msg import GpuImage, GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudPublisher, PointCloudReader

IMAGE_TOPIC, CLOUD_TOPIC, NOTE_TOPIC = "/bag_test/image", "/bag_test/cloud", "/bag_test/note"
CLOUD_HEIGHT, CLOUD_WIDTH, POINT_STEP = 16, 128, 48


def image_bytes(i: int, height: int, width: int) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 256, (height, width, 3), dtype=np.uint8)


def cloud_bytes(i: int) -> np.ndarray:
    return np.random.default_rng(100_000 + i).integers(0, 256, CLOUD_HEIGHT * CLOUD_WIDTH * POINT_STEP, dtype=np.uint8)


def stamp_index(stamp) -> int:
    return int(stamp.sec) - 1000


def camera(count: str, width: str, height: str, rate: str, memory: str = "host") -> dict:
    n, w, h, period = int(count), int(width), int(height), 1.0 / float(rate)
    with peer_node("bag_test_camera") as node, \
            ImagePublisher(node, IMAGE_TOPIC, width=w, height=h, encoding="rgb8", memory=memory, block_count=32,
                           qos=100) as images, \
            PointCloudPublisher(node, CLOUD_TOPIC, fields="ouster", width=CLOUD_WIDTH, height=CLOUD_HEIGHT,
                                memory=memory, block_count=32, qos=100) as clouds:
        from std_msgs.msg import String

        notes = node.create_publisher(String, NOTE_TOPIC, 100)  # a topic of another type: recorded as it is
        deadline = time.monotonic() + 60
        while (images.subscription_count == 0 or clouds.subscription_count == 0
               or notes.get_subscription_count() == 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the recorder has subscribed; let its first reads settle
        print(json.dumps({"ready": True}), flush=True)
        published = [0, 0]
        start = time.monotonic()
        for i in range(n):
            header = GpuImage().header
            header.stamp.sec, header.stamp.nanosec = 1000 + i, i
            header.frame_id = "camera"
            if images.publish_array(image_bytes(i, h, w), header=header) is not None:
                published[0] += 1
            header.frame_id = "lidar"
            cloud = np.frombuffer(cloud_bytes(i).tobytes(), dtype=clouds.layout.dtype).reshape(CLOUD_HEIGHT,
                                                                                              CLOUD_WIDTH)
            if clouds.publish_array(cloud, header=header) is not None:
                published[1] += 1
            notes.publish(String(data=f"frame {i}"))
            time.sleep(max(0.0, start + (i + 1) * period - time.monotonic()))
        time.sleep(1.0)  # keep the pools alive while the recorder copies the last frames
        return {"images": published[0], "clouds": published[1]}


def checker(count: str, timeout: str, width: str, height: str) -> dict:
    """Count and check every replayed frame on the two topics until ``count`` of each or ``timeout`` seconds."""
    n, w, h = int(count), int(width), int(height)
    images, clouds = ImageReader(), PointCloudReader()
    seen = {"images": 0, "clouds": 0, "bad": [], "stamps": [], "memory": set()}

    def read(reader, msg, what: str):
        try:
            return reader.read(msg)
        except Ros2CudaIpcError as exc:
            seen["bad"].append(f"{what} unreadable: {exc}")
            return None

    def on_image(msg: GpuImage) -> None:
        if (view := read(images, msg, "image")) is None:
            return
        with view:
            seen["memory"].add(view.memory)
            i = stamp_index(view.header.stamp)
            if view.header.stamp.nanosec != i or not np.array_equal(np.asarray(view.array) if view.memory == "host"
                                                                    else _download(view), image_bytes(i, h, w)):
                seen["bad"].append(f"image {i}")
            seen["stamps"].append(i)
            seen["images"] += 1

    def on_cloud(msg: GpuPointCloud2) -> None:
        if (view := read(clouds, msg, "cloud")) is None:
            return
        with view:
            i = stamp_index(view.header.stamp)
            data = np.asarray(view.structured).view(np.uint8).reshape(-1) if view.memory == "host" else None
            if data is not None and not np.array_equal(data, cloud_bytes(i)):
                seen["bad"].append(f"cloud {i}")
            seen["clouds"] += 1

    with peer_node("bag_test_checker") as node:
        import rclpy

        node.create_subscription(GpuImage, IMAGE_TOPIC, on_image, 100)
        node.create_subscription(GpuPointCloud2, CLOUD_TOPIC, on_cloud, 100)
        print(json.dumps({"ready": True}), flush=True)
        first = None
        deadline = time.monotonic() + float(timeout)
        while (seen["images"] < n or seen["clouds"] < n) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
            if first is None and seen["images"]:
                first = time.monotonic()
        seen["span"] = (time.monotonic() - first) if first else None
    seen["memory"] = sorted(seen["memory"])
    return seen


def pattern(i: int, height: int, width: int, channels: int, xp=np) -> object:
    """The GPU tests' frame ``i``: cheap to make in numpy and in torch alike (``xp``), different in every pixel."""
    if xp is np:
        rows, cols, chans = np.ogrid[:height, :width, :channels]
        return ((rows * 7 + cols * 3 + chans * 11 + i) % 256).astype(np.uint8)
    rows = xp.arange(height, device="cuda").view(-1, 1, 1)
    cols = xp.arange(width, device="cuda").view(1, -1, 1)
    chans = xp.arange(channels, device="cuda").view(1, 1, -1)
    return ((rows * 7 + cols * 3 + chans * 11 + i) % 256).to(xp.uint8)


def gpu_camera(count: str, width: str, height: str, rate: str) -> dict:
    """rgba8 frames made by torch in a CUDA pool, at ``rate`` Hz: what bag_record must keep up with."""
    import torch

    n, w, h, period = int(count), int(width), int(height), 1.0 / float(rate)
    with peer_node("bag_test_gpu_camera") as node, \
            ImagePublisher(node, IMAGE_TOPIC, width=w, height=h, encoding="rgba8", memory="cuda", block_count=16,
                           qos=100) as images:
        deadline = time.monotonic() + 60
        while images.subscription_count == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        print(json.dumps({"ready": True}), flush=True)
        published, late = 0, 0
        start = time.monotonic()
        stream = torch.cuda.current_stream()
        for i in range(n):
            frame = images.borrow(timeout=0.5)
            if frame is None:
                continue
            with frame:
                torch.from_dlpack(frame).copy_(pattern(i, h, w, 4, torch))
                header = GpuImage().header
                header.stamp.sec, header.stamp.nanosec = 1000 + i, i
                frame.publish(stream, header=header)
                published += 1
            wait = start + (i + 1) * period - time.monotonic()
            late += wait < 0
            time.sleep(max(0.0, wait))
        time.sleep(2.0)
        return {"images": published, "late": late, "seconds": time.monotonic() - start}


def torch_checker(count: str, timeout: str, width: str, height: str) -> dict:
    """Read every replayed image with torch on the GPU and compare it there with :func:`pattern`."""
    import rclpy
    import torch

    n, w, h = int(count), int(width), int(height)
    images = ImageReader()
    seen = {"images": 0, "bad": [], "memory": set(), "stale": 0}
    stream = torch.cuda.Stream()
    # Its first comparison loads torch's kernels: seconds on a GPU shared with a suite's jobs (session 20: the player's
    # 16 blocks moved on meanwhile).  Done before it says ready, so what it measures is the replay.
    with torch.cuda.stream(stream):
        torch.equal(pattern(0, h, w, 3, torch), pattern(0, h, w, 3, torch))
    stream.synchronize()

    def on_image(msg: GpuImage) -> None:
        try:
            view = images.read(msg, stream)
        except StaleDescriptorError:  # it fell behind the player: said in its result, not a crash
            seen["stale"] += 1
            return
        with view, torch.cuda.stream(stream):
            seen["memory"].add(view.memory)
            i = stamp_index(view.header.stamp)
            if not torch.equal(torch.from_dlpack(view), pattern(i, h, w, 3, torch)):
                seen["bad"].append(i)
            seen["images"] += 1

    with peer_node("bag_test_torch_checker") as node:
        node.create_subscription(GpuImage, IMAGE_TOPIC, on_image, 100)
        print(json.dumps({"ready": True}), flush=True)
        deadline = time.monotonic() + float(timeout)
        while seen["images"] + seen["stale"] < n and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
    seen["memory"] = sorted(seen["memory"])
    return seen


def _download(view) -> np.ndarray:
    out = np.empty(view.shape, view.dtype)
    view.copy_out(view.layout, out)
    return out


if __name__ == "__main__":
    sys.exit(play({"camera": camera, "checker": checker, "gpu_camera": gpu_camera, "torch_checker": torch_checker}))
