"""Real processes that cuda_ipc_top's tests watch, each reporting on /diagnostics as it would in a pipeline.

    top_peer.py camera TOPIC        # an image publisher (host memory, 64x48, 10 frames a second)
    top_peer.py reader TOPIC        # an image subscription on TOPIC, its reader reporting
    top_peer.py tensors TOPIC       # as inference: a GpuTensor subscription read through a TensorReader made without
                                    # node=, sharing the Reader of an ImageReader that reports (on TOPIC, unread)
    top_peer.py tensor-camera TOPIC # a tensor publisher (host memory, (1, 3, 8, 8) float32, 10 a second)
    top_peer.py late DELAY          # a /diagnostics publisher whose first report comes DELAY s after ``ready``
    top_peer.py hostile             # issue 28's statuses: inf, 1e400, nan, pools="aa:inf", an escape-laden topic
    top_peer.py crowd POOLS READERS # issue 35's: READERS readers with 2 KB names, each naming all POOLS pools

Each prints ``ready`` once it is reporting (``late``: once its publisher exists), then runs until SIGTERM.
"""

import os
import signal
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from peers import peer_node, play

from ros2_cuda_ipc_core import DIAGNOSTICS_TOPIC, STATUS_PREFIX, StaleDescriptorError

#: The node and topic the ``late`` reporter says it reads.
LATE_NODE, LATE_TOPIC = "/late/reader", "/late/image"
#: The topic the ``hostile`` reporter's pool claims: it clears the screen and forges a row, printed raw.
HOSTILE_TOPIC = "/cam\x1b[2J\x1b[31mPWNED\x1b[0m\n/fake  row"


def _spin_until_stopped(node, every: float = 0.0, work=lambda: None) -> None:
    import rclpy

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    deadline, next_at = time.monotonic() + 120, time.monotonic()
    while not stop and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=max(0.0, min(0.05, next_at - time.monotonic())))
        if every and time.monotonic() >= next_at:
            work()
            next_at += every


def camera(topic: str) -> None:
    from ros2_cuda_ipc_image import ImagePublisher

    pattern = np.arange(48 * 64 * 3, dtype=np.uint32).astype(np.uint8).reshape(48, 64, 3)
    with peer_node("top_test_camera") as node, \
            ImagePublisher(node, topic, width=64, height=48, encoding="rgb8", memory="host", reuse_delay=0) as pub:
        print("ready", flush=True)
        _spin_until_stopped(node, 0.1, lambda: pub.publish_array(pattern))


def reader(topic: str) -> None:
    from ros2_cuda_ipc_image import ImageReader, ImageSubscription

    frames = []
    with peer_node("top_test_reader") as node:
        subscription = ImageSubscription(node, topic, lambda view: (frames.append(view.shape), view.close()),
                                         reader=ImageReader(node=node, topic=topic), fallback="never")
        print("ready", flush=True)
        _spin_until_stopped(node)
        subscription.close()


def tensor_camera(topic: str) -> None:
    from ros2_cuda_ipc_tensor import TensorPublisher

    batch = np.ones((1, 3, 8, 8), np.float32)
    with peer_node("top_test_tensor_camera") as node, \
            TensorPublisher(node, topic, shape=batch.shape, dtype=np.float32, memory="host", reuse_delay=0) as pub:
        print("ready", flush=True)
        _spin_until_stopped(node, 0.1, lambda: pub.publish_array(batch))


def tensors(topic: str) -> None:
    """Inference's readers (``TensorConsumer``): the reporting reader is an ImageReader, the reading one is not."""
    from ros2_cuda_ipc_image import ImageReader
    from ros2_cuda_ipc_msgs.msg import GpuTensor
    from ros2_cuda_ipc_tensor import TensorReader

    with peer_node("top_test_tensors") as node:
        reporting = ImageReader(node=node, topic=topic)
        tensor_reader = TensorReader(reporting.reader)  # no node=: as inference's

        def read(msg: GpuTensor) -> None:
            try:
                with tensor_reader.read(msg):
                    pass
            except StaleDescriptorError:  # fell behind the camera (a loaded machine): dropped, as inference does
                pass

        node.create_subscription(GpuTensor, topic, read, 10)
        print("ready", flush=True)
        _spin_until_stopped(node)
        reporting.close()


def late(delay: str) -> None:
    """A reporter that top can find at once but hears from only ``delay`` s after it is ready (then once a second)."""
    import rclpy

    with peer_node("top_test_late") as node:
        publisher = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        print("ready", flush=True)
        first = time.monotonic() + float(delay)
        while time.monotonic() < first:
            rclpy.spin_once(node, timeout_sec=0.05)
        status = DiagnosticStatus(name=f"{STATUS_PREFIX}reader: {LATE_NODE} {LATE_TOPIC}", values=[
            KeyValue(key=key, value=value) for key, value in {
                "kind": "reader", "topic": LATE_TOPIC, "node": LATE_NODE, "pid": str(os.getpid()), "pools": ""}.items()])
        _spin_until_stopped(node, 1.0, lambda: publisher.publish(DiagnosticArray(status=[status])))


def _status(name: str, **values: str) -> DiagnosticStatus:
    return DiagnosticStatus(name=f"{STATUS_PREFIX}{name}", hardware_id="\x1b]0;hw\x07",
                            values=[KeyValue(key=key, value=value) for key, value in values.items()])


def hostile() -> None:
    """What any DDS participant may publish: numbers that are not finite, and names that are terminal commands."""
    array = DiagnosticArray(status=[
        _status("pool: x", kind="pool", topic=HOSTILE_TOPIC, node="/evil\x9b2J", pid="inf", pool_id="aa",
                memory="host", rate_hz="nan", blocks_in_use="1e400", blocks_held_by_readers="-inf", blocks_free="nan",
                acquire_misses="1e400"),
        _status("reader: y", kind="reader", topic=HOSTILE_TOPIC, node="/evil/reader", pid="nan", rate_hz="1e400",
                stale_drops="inf", fallback_frames="nan", latency_p50_ms="inf", latency_p99_ms="nan", pools="aa:inf"),
        _status("reader: z\x1b[2J", **{"kind": "reader", "topic": "/orphan\r", "pid": "1e400", "\x1b[2J": "x"})])
    with peer_node("top_test_hostile") as node:
        publisher = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        print("ready", flush=True)
        _spin_until_stopped(node, 0.5, lambda: publisher.publish(array))


def crowd_array(pools: int, readers: int, node: str) -> DiagnosticArray:
    """``readers`` readers (named ``node``) that each name every one of ``pools`` pools: each pool named made the
    reader an entry of that pool's row (issue 35: 647 KB of it made 14.9 MB of JSON in 10.2 s)."""
    named = ",".join(f"{i:x}:1" for i in range(pools))
    return DiagnosticArray(status=[
        *(_status(f"pool: {i}", kind="pool", topic=f"/crowd/t{i}", node="/n", pid=str(i), pool_id=f"{i:x}")
          for i in range(pools)),
        *(_status(f"reader: {j}", kind="reader", topic="/crowd/t0", node=node, pid=str(j), pools=named)
          for j in range(readers))])


def crowd(pools: str, readers: str) -> None:
    from rclpy.serialization import serialize_message

    array = crowd_array(int(pools), int(readers), "/r" + "\x01" * 2000)
    with peer_node("top_test_crowd") as node:
        publisher = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        print(f"ready {len(serialize_message(array))} bytes", flush=True)
        _spin_until_stopped(node, 1.0, lambda: publisher.publish(array))


if __name__ == "__main__":
    play({"camera": camera, "reader": reader, "tensor-camera": tensor_camera, "tensors": tensors, "late": late,
          "hostile": hostile, "crowd": crowd})
