"""Real processes for test_pointcloud_multiprocess.py: a PointCloudPublisher and a PointCloudReader, over DDS."""

import json
import sys

import numpy as np
import rclpy
from ack_flow import Acker, AckGate
from cloud_samples import SAMPLES, field_values, sample_bytes

from ros2_cuda_ipc_msgs.msg import GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudPublisher, PointCloudReader

OUSTER = SAMPLES["ouster"].layout


def base_fields() -> dict[str, np.ndarray]:
    data = sample_bytes(OUSTER, seed=99)
    return {name: field_values(OUSTER, data, name) for name in OUSTER.field_names}


def expected(base: dict[str, np.ndarray], name: str, seq: int) -> np.ndarray:
    """Cloud ``seq``: every field of the base cloud plus ``seq`` (integers wrap)."""
    values = base[name]
    return values + values.dtype.type(seq % 200)


def publisher(count: int) -> None:
    rclpy.init()
    node = rclpy.create_node("cloud_test_publisher")
    gate = AckGate(node, "cloud_test_acks")
    pub = PointCloudPublisher(node, "cloud_test_points", fields="ouster", width=1024, height=128, memory="host",
                              block_count=4, qos=100, reuse_delay=0)
    base = base_fields()
    if not gate.wait_for_subscribers(1):
        raise SystemExit("the reader did not appear within 60 s (DDS discovery)")
    for seq in range(count):
        gate.wait_until_within(seq, pub.pool.block_count)
        frame = pub.borrow(timeout=5.0)
        with frame:
            for name in OUSTER.field_names:
                np.asarray(frame.field(name))[...] = expected(base, name, seq)
            frame.publish()
    gate.wait_until_within(count - 1, 0, timeout=60)
    print(json.dumps({"stats": pub.pool.stats()}), flush=True)
    pub.close()
    node.destroy_node()
    rclpy.shutdown()


def check(view, base: dict[str, np.ndarray], seq: int) -> list[str]:
    errors = []
    if (view.height, view.width, view.point_step) != (128, 1024, 48):
        return [f"cloud {seq}: {view.height} x {view.width} x {view.point_step}"]
    structured = view.structured
    for name in OUSTER.field_names:
        want = expected(base, name, seq)
        for how, seen in (("field", np.asarray(view.field(name))), ("structured", structured[name])):
            if not np.array_equal(seen, want):
                errors.append(f"cloud {seq}: {how} {name}: {int((seen != want).sum())} wrong values")
    return errors


def subscriber(count: int) -> None:
    rclpy.init()
    node = rclpy.create_node("cloud_test_subscriber")
    clouds = PointCloudReader()
    acker = Acker(node, "cloud_test_acks", "reader", clouds.reader)
    base = base_fields()
    result: dict = {"verified": 0, "errors": []}
    seen = [0]

    def on_cloud(msg: GpuPointCloud2) -> None:
        seq = seen[0]
        try:
            with clouds.read(msg) as view:
                errors = check(view, base, seq)
            result["errors"].extend(errors)
            result["verified"] += not errors
        except Exception as exc:
            result["errors"].append(f"cloud {seq}: {type(exc).__name__}: {exc}")
        acker.ack(seq)
        seen[0] += 1

    node.create_subscription(GpuPointCloud2, "cloud_test_points", on_cloud, 100)
    acker.spin_until_received(node, lambda: seen[0], count)
    result["stats"] = clouds.stats()
    print(json.dumps(result), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    {"publisher": publisher, "subscriber": subscriber}[sys.argv[1]](int(sys.argv[2]))
