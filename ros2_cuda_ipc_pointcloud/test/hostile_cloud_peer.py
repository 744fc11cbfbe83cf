"""Real processes for test_hostile_clouds.py: a PointCloudSubscription fed by a genuine publisher while a hostile
one sends issue 35's 1.5 KiB clouds (60 overlapping fields of count 65,536).

    hostile_cloud_peer.py genuine TOPIC        # 20 host clouds a second until SIGTERM
    hostile_cloud_peer.py hostile TOPIC        # 20 hostile GpuPointCloud2 a second until SIGTERM
    hostile_cloud_peer.py subscriber TOPIC N   # prints "steady" after 20 genuine clouds, then runs until it has
                                               # refused N hostile clouds and delivered N genuine ones since the
                                               # first refusal (or 120 s), and prints what it counted, as JSON

The publishers print ``ready`` once publishing, and their count as JSON when stopped.
"""

import os
import signal
import time

import numpy as np
from peers import peer_node, play
from rclpy.serialization import serialize_message
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

#: Issue 35's message: every field covers the whole 65,536-byte point, so each names 65,536 values.
HOSTILE_FIELDS, HOSTILE_COUNT = 60, 65_536
WIDTH = 1000


def _run_until_sigterm(node, every: float, work) -> int:
    """Call ``work()`` every ``every`` s while spinning ``node``, until SIGTERM (or 300 s); how many calls."""
    import rclpy

    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    calls, next_at, deadline = 0, time.monotonic(), time.monotonic() + 300
    while not stop and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=max(0.0, min(0.02, next_at - time.monotonic())))
        if time.monotonic() >= next_at:
            work()
            calls += 1
            next_at += every
    return calls


def genuine(topic: str) -> dict:
    from ros2_cuda_ipc_pointcloud import PointCloudPublisher

    with peer_node("hostile_test_genuine") as node, \
            PointCloudPublisher(node, topic, fields="xyz", width=WIDTH, memory="host", block_count=6,
                                reuse_delay=0) as pub:
        points = np.arange(WIDTH * 3, dtype=np.float32).reshape(WIDTH, 3)

        def publish() -> None:
            frame = pub.borrow(timeout=0.5)
            if frame is not None:
                with frame:
                    np.asarray(frame.xyz)[...] = points
                    frame.publish()

        print("ready", flush=True)
        return {"published": _run_until_sigterm(node, 0.05, publish)}


def hostile_message(uid: int) -> GpuPointCloud2:
    msg = GpuPointCloud2(height=1, width=1, point_step=HOSTILE_COUNT, row_step=HOSTILE_COUNT)
    msg.fields = [PointField(name=f"f{i}", offset=0, datatype=PointField.UINT8, count=HOSTILE_COUNT)
                  for i in range(HOSTILE_FIELDS)]
    msg.core.socket_path = "@nobody"
    msg.core.pool_id = list(os.urandom(16))
    msg.core.block_id, msg.core.uid, msg.core.publisher_pid = 0, uid, 1
    msg.core.byte_size = HOSTILE_COUNT
    return msg


def hostile(topic: str) -> dict:
    with peer_node("hostile_test_forger") as node:
        publisher = node.create_publisher(GpuPointCloud2, topic, 10)
        uids = iter(range(1, 1 << 62))
        print(f"ready {len(serialize_message(hostile_message(1)))} bytes a message", flush=True)
        return {"published": _run_until_sigterm(node, 0.05, lambda: publisher.publish(hostile_message(next(uids))))}


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def subscriber(topic: str, count: str) -> dict:
    import rclpy

    from ros2_cuda_ipc_pointcloud import PointCloudReader, PointCloudSubscription

    wanted = int(count)
    delivered: list[float] = []  # monotonic time of each genuine cloud

    def on_cloud(view) -> None:
        with view:
            ok = view.width == WIDTH and float(np.asarray(view.field("z"))[-1]) == WIDTH * 3 - 1
        if ok:
            delivered.append(time.monotonic())

    with peer_node("hostile_test_subscriber") as node:
        reader = PointCloudReader()
        subscription = PointCloudSubscription(node, topic, on_cloud, reader=reader, memory="host", fallback="never")
        deadline = time.monotonic() + 120
        while len(delivered) < 20 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        rss_before, steady = rss_mib(), len(delivered)
        print("steady", flush=True)
        first_refusal, rss_peak, per_second, second_ends = None, rss_before, [], time.monotonic() + 1.0
        cpu_start = time.process_time()
        while time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
            refused = reader.stats()["invalid_descriptors"]
            if first_refusal is None and refused:
                first_refusal = time.monotonic()
            if time.monotonic() >= second_ends:
                rss_peak = max(rss_peak, rss_mib())
                per_second.append(sum(1 for t in delivered if second_ends - 1.0 <= t < second_ends))
                second_ends += 1.0
            since = 0 if first_refusal is None else sum(1 for t in delivered if t >= first_refusal)
            if refused >= wanted and since >= wanted:
                break
        cpu_s = time.process_time() - cpu_start
        rss_after = rss_mib()
        result = {"steady": steady, "refused": refused, "delivered_since_first_refusal": since,
                  "clouds_per_second": per_second, "rss_mib": [round(rss_before, 1), round(max(rss_peak, rss_after), 1),
                                                               round(rss_after, 1)],
                  "cpu_s": round(cpu_s, 2), "stats": subscription.stats()}
        subscription.close()
        reader.close()
        return result


if __name__ == "__main__":
    play({"genuine": genuine, "hostile": hostile, "subscriber": subscriber})
