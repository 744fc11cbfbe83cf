"""Real processes for test_pointcloud_multiprocess.py: a PointCloudPublisher and a PointCloudReader, over DDS."""

import numpy as np
from ack_flow import publish_acknowledged, receive_acknowledged
from cloud_samples import SAMPLES, field_values, sample_bytes
from peers import peer_node, play

from ros2_cuda_ipc_msgs.msg import GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudPublisher, PointCloudReader

OUSTER = SAMPLES["ouster"].layout
TOPIC = "cloud_test_points"


def base_fields() -> dict[str, np.ndarray]:
    data = sample_bytes(OUSTER, seed=99)
    return {name: field_values(OUSTER, data, name) for name in OUSTER.field_names}


def expected(base: dict[str, np.ndarray], name: str, seq: int) -> np.ndarray:
    """Cloud ``seq``: every field of the base cloud plus ``seq`` (integers wrap)."""
    values = base[name]
    return values + values.dtype.type(seq % 200)


def publisher(count: str) -> dict:
    base = base_fields()
    with peer_node("cloud_test_publisher") as node, \
            PointCloudPublisher(node, TOPIC, fields="ouster", width=1024, height=128, memory="host", block_count=4,
                                qos=100, reuse_delay=0) as pub:
        def publish(seq: int) -> None:
            with pub.borrow(timeout=5.0) as frame:
                for name in OUSTER.field_names:
                    np.asarray(frame.field(name))[...] = expected(base, name, seq)
                frame.publish()

        publish_acknowledged(node, TOPIC, int(count), pub.pool.block_count, publish, lambda: pub.subscription_count)
        return {"stats": pub.pool.stats()}


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


def subscriber(count: str) -> dict:
    clouds = PointCloudReader()
    base = base_fields()

    def check_cloud(msg: GpuPointCloud2, seq: int) -> list[str]:
        with clouds.read(msg) as view:
            return check(view, base, seq)

    with peer_node("cloud_test_subscriber") as node:
        result = receive_acknowledged(node, TOPIC, GpuPointCloud2, int(count), clouds.reader, check_cloud, item="cloud")
    return {**result, "stats": clouds.stats()}


if __name__ == "__main__":
    play({"publisher": publisher, "subscriber": subscriber})
