"""Real processes of the fallback tests: a typed publisher driven line by line, and typed subscriptions.

``publisher KIND TOPIC`` reads commands on stdin and answers each with one JSON line:
``match N`` (spin until N descriptor subscriptions matched), ``burst N TAG NAMES`` (publish N frames named
TAG-i, i counted across bursts, each once the subscribers NAMES (comma separated) acknowledged the one
before), ``await_twin NAMES`` (publish warm-up frames until the twin has a subscriber and NAMES acknowledge),
``await_no_twin`` (until the twin has no subscriber), ``await_ack NAMES`` (warm-up frames until NAMES
acknowledge the latest: a subscriber that joined late is in step), ``flood N TAG`` (N frames as fast as blocks are free,
no acknowledgements), ``forge_dead N`` (N descriptors naming this pool's id with the socket of a pid that is
not running, from another DDS writer), ``stats`` (the pool's counters), ``quit``.  Every answer carries the
twins' counters.

``subscriber KIND TOPIC NAME FALLBACK COUNT [DELIVERY]`` checks every frame named main-i against its pattern,
byte for byte, acknowledges each on TOPIC_acks, and ends after COUNT main frames (or, when it gets none, after
COUNT descriptors were refused, or on a line ``stop`` on stdin); it reports the order of the main frames
(``seqs``) and whether its callback ran on the executor's thread or another (``threads``).  KIND is ``image``
(1280x720 bgr8, padded rows) or ``cloud`` (16 x 256 Ouster points, 48 bytes each, every byte of every field
checked).
"""

from __future__ import annotations

import json
import os
import select
import sys
import time

import numpy as np
import rclpy
from ack_flow import ack_qos
from peers import peer_node, play
from std_msgs.msg import Header, String

from ros2_cuda_ipc_core.pool.socket_names import pool_socket_path

QOS = 100
HEIGHT, WIDTH = 720, 1280
CLOUD_ROWS, CLOUD_COLS, POINT_STEP = 16, 256, 48


def pattern(kind: str, seq: int) -> np.ndarray:
    if kind == "image":
        rows, cols, chans = np.ogrid[:HEIGHT, :WIDTH, :3]
        return ((rows * 7 + cols * 3 + chans * 50 + seq) % 256).astype(np.uint8)
    points = np.arange(CLOUD_ROWS * CLOUD_COLS * POINT_STEP, dtype=np.int64).reshape(CLOUD_ROWS, CLOUD_COLS, POINT_STEP)
    return ((points * 13 + seq * 7) % 251).astype(np.uint8)


#: Where the publisher's frames live: host memory, or CUDA memory (``R2CI_MEMORY=cuda``; images only, written with torch).
MEMORY = os.environ.get("R2CI_MEMORY", "host")


def make_publisher(kind: str, node, topic: str):
    if kind == "image":
        from ros2_cuda_ipc_image import ImagePublisher

        return ImagePublisher(node, topic, width=WIDTH, height=HEIGHT, encoding="bgr8", row_alignment=4096,
                              memory=MEMORY, block_count=8, qos=QOS)
    from ros2_cuda_ipc_pointcloud import PointCloudPublisher

    return PointCloudPublisher(node, topic, fields="ouster", width=CLOUD_COLS, height=CLOUD_ROWS, memory="host",
                               block_count=8, qos=QOS)


def publish(kind: str, pub, seq: int, name: str) -> None:
    header = Header(frame_id=name)
    if kind == "image":
        with pub.borrow(timeout=5.0) as frame:
            if MEMORY == "cuda":
                import torch

                torch.from_dlpack(frame).copy_(torch.from_numpy(pattern(kind, seq)).cuda())
                torch.cuda.synchronize()
            else:
                frame.array[...] = pattern(kind, seq)
            frame.publish(header=header)
    else:
        assert pub.publish_array(pattern(kind, seq), header=header) is not None, "no free block"


def publisher(kind: str, topic: str) -> None:
    with peer_node(f"fallback_{kind}_publisher") as node, make_publisher(kind, node, topic) as pub:
        acked: dict[str, int] = {}
        node.create_subscription(String, f"{topic}_acks", lambda msg: acked.__setitem__(*_ack(msg)), ack_qos())
        twin = pub.twins.topics[0]
        sent = [0]  # frames are numbered across bursts, so an acknowledgement names one frame

        def spin_until(done, timeout: float) -> bool:
            deadline = time.monotonic() + timeout
            while not done() and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.01)
            return bool(done())

        def send(tag: str, pace: list[str]) -> None:
            seq = sent[0]
            if not spin_until(lambda: all(acked.get(n, -2) >= seq - 1 for n in pace), 60):
                raise TimeoutError(f"{tag}-{seq}: {pace} did not acknowledge frame {seq - 1}: {acked}")
            publish(kind, pub, seq, f"{tag}-{seq}")
            sent[0] += 1

        def answer(**extra) -> None:
            print(json.dumps({"twins": pub.fallback_stats(), "twin_subscribers": pub.twins.subscription_counts()[twin],
                              "sent": sent[0], **extra}), flush=True)

        for line in sys.stdin:
            command, *args = line.split()
            names = [n for n in args[-1].split(",") if n != "-"] if command in ("burst", "await_twin", "await_ack") else []
            if command == "match":
                spin_until(lambda wanted=int(args[0]): pub.subscription_count >= wanted, 60)
                answer(matched=pub.subscription_count)
            elif command == "burst":  # burst N TAG NAMES: each frame once NAMES acknowledged the one before
                for _ in range(int(args[0])):
                    send(args[1], names)
                spin_until(lambda pace=names: all(acked.get(n, -2) >= sent[0] - 1 for n in pace), 60)
                answer(acked=acked)
            elif command == "await_twin":  # await_twin NAMES: warm-up frames until the twin is subscribed, NAMES ack
                warmups = 0
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline and not (pub.twins.subscription_counts()[twin]
                                                           and all(acked.get(n, -2) >= sent[0] - 1 for n in names)):
                    publish(kind, pub, sent[0], f"warmup-{sent[0]}")
                    sent[0] += 1
                    warmups += 1
                    spin_until(lambda: False, 0.2)
                answer(warmups=warmups, acked=acked)
            elif command == "await_ack":  # await_ack NAMES: warm-up frames until NAMES acknowledge the latest
                warmups = 0
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not (sent[0] and all(acked.get(n, -2) >= sent[0] - 1
                                                                           for n in names)):
                    publish(kind, pub, sent[0], f"warmup-{sent[0]}")
                    sent[0] += 1
                    warmups += 1
                    spin_until(lambda pace=names: all(acked.get(n, -2) >= sent[0] - 1 for n in pace), 0.3)
                answer(warmups=warmups, acked=acked)
            elif command == "await_no_twin":
                spin_until(lambda: not pub.twins.subscription_counts()[twin], 60)
                answer()
            elif command == "flood":  # flood N TAG: as fast as blocks are free, nobody waited for
                skipped = 0
                for _ in range(int(args[0])):
                    if flood_one(pub, f"{args[1]}-{sent[0]}"):
                        sent[0] += 1
                    else:
                        skipped += 1
                answer(skipped=skipped, pool=_plain(pub.pool.stats()))
            elif command == "forge_dead":
                answer(forged=forge_dead(node, pub, topic, int(args[0])))
            elif command == "stats":
                answer(pool=_plain(pub.pool.stats()))
            elif command == "quit":
                answer()
                return


def flood_one(pub, name: str) -> bool:
    """Publish one frame, its bytes not written (nobody checks a flood), if a block is free within 50 ms."""
    frame = pub.borrow(timeout=0.05)
    if frame is None:
        return False
    with frame:
        frame.publish(header=Header(frame_id=name))
    return True


def forge_dead(node, pub, topic: str, count: int) -> int:
    """``count`` descriptors that name this pool's id, from another DDS writer, with the socket name (and
    publisher pid) of a process that is not running: an attacker's try to decide this pool's route."""
    import subprocess

    from ros2_cuda_ipc_msgs.msg import GpuImage

    dead = subprocess.Popen(["true"])
    dead.wait()
    writer = node.create_publisher(GpuImage, topic, QOS)
    spin = time.monotonic() + 10
    while writer.get_subscription_count() == 0 and time.monotonic() < spin:
        rclpy.spin_once(node, timeout_sec=0.05)
    for seq in range(count):
        msg = GpuImage()
        pub.layout.fill_message(msg)
        msg.header = Header(frame_id=f"forged-{seq}")
        msg.core.socket_path = pool_socket_path(bytes(pub.pool.pool_id_array), dead.pid, None)
        msg.core.pool_id = pub.pool.pool_id_array
        msg.core.publisher_pid = dead.pid
        msg.core.block_id, msg.core.uid, msg.core.byte_size = 0, seq + 1, pub.pool.block_size
        writer.publish(msg)
        rclpy.spin_once(node, timeout_sec=0.05)
    return count


def _plain(stats: dict) -> dict:
    """A pool's stats as JSON has them (``holders`` is keyed by ints)."""
    return {key: value for key, value in stats.items() if key != "holders"}


def _ack(msg: String) -> tuple[str, int]:
    name, seq = msg.data.split()
    return name, int(seq)


def subscriber(kind: str, topic: str, name: str, fallback: str, count: str, delivery: str = "executor") -> dict:
    import threading

    want = int(count)
    result: dict = {"verified": 0, "errors": [], "memory": set(), "seqs": [], "threads": set()}
    main_thread = threading.get_ident()
    with peer_node(f"fallback_{kind}_{name}") as node:
        acks = node.create_publisher(String, f"{topic}_acks", ack_qos())

        def check(view) -> None:
            frame = view.header.frame_id
            result["memory"].add(view.memory)
            result["threads"].add("executor" if threading.get_ident() == main_thread else "other")
            seq = int(frame.rsplit("-", 1)[1])
            if frame.startswith("main-"):
                result["seqs"].append(seq)
                if kind == "image":  # one strided copy to the host, from host or CUDA memory
                    got = np.empty(view.shape, view.dtype)
                    view.copy_out(view.layout, got)
                else:
                    got = np.asarray(view.structured).view(np.uint8).reshape(CLOUD_ROWS, CLOUD_COLS, POINT_STEP)
                if not np.array_equal(got, pattern(kind, seq)):
                    result["errors"].append(f"{frame}: {int((got != pattern(kind, seq)).sum())} wrong bytes")
                else:
                    result["verified"] += 1
            view.close()
            acks.publish(String(data=f"{name} {seq}"))

        if kind == "image":
            from ros2_cuda_ipc_image import ImageSubscription as Subscription
        else:
            from ros2_cuda_ipc_pointcloud import PointCloudSubscription as Subscription
        sub = Subscription(node, topic, check, QOS, fallback=fallback, delivery=delivery)
        deadline = time.monotonic() + 150
        commands = [sys.stdin]
        while time.monotonic() < deadline:
            if commands and select.select(commands, [], [], 0)[0]:
                line = sys.stdin.readline()
                if line.strip() == "stop":
                    break
                if not line:
                    commands = []  # stdin closed: nothing more to wait for there
            stats = sub.stats()
            if result["verified"] + len(result["errors"]) >= want or stats["frames"]["refused"] >= want:
                break
            if not result["memory"]:  # nothing received yet: say that this subscriber listens
                acks.publish(String(data=f"{name} -1"))
            rclpy.spin_once(node, timeout_sec=0.05)
        time.sleep(0.3)  # the last acknowledgement leaves
        result["stats"] = sub.stats()
        sub.close()
    result["memory"] = sorted(result["memory"])
    result["threads"] = sorted(result["threads"])
    return result


def become_requested_user() -> None:
    """Drop to ``R2CI_RUN_AS`` ("uid:gid") when set, once everything this peer imports is imported: the
    interpreter of this workspace may live where another user cannot read it (under a 0700 /root), so
    ``runuser`` cannot start it, but a root process that gives up its ids is that user from then on."""
    ids = os.environ.get("R2CI_RUN_AS")
    if not ids:
        return
    import rclpy.executors  # noqa: F401  (everything rclpy.init and the subscriptions import later)

    import ros2_cuda_ipc_image  # noqa: F401
    import ros2_cuda_ipc_pointcloud  # noqa: F401

    uid, gid = (int(n) for n in ids.split(":"))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


if __name__ == "__main__":
    become_requested_user()
    play({"publisher": publisher, "subscriber": subscriber})
