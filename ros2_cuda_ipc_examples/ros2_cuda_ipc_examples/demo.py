"""End-to-end demo: two real ROS 2 processes share frames through a ros2_cuda_ipc pool.

The publisher process writes each frame into a pool block and publishes only the descriptor;
the subscriber process maps the same memory read-only and checks every frame.  Run it with
``make demo`` or ``ros2 run ros2_cuda_ipc_examples demo``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from ros2_cuda_ipc_examples.two_process import add_role_argument, dispatch, run_roles

TOPIC = "ros2_cuda_ipc_demo/frames"


def _qos():
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy

    return QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE)


def frame_value(seq: int) -> int:
    return (seq * 37 + 11) % 251


def run_publisher(args: argparse.Namespace) -> None:
    import rclpy
    from rclpy.serialization import serialize_message

    from ros2_cuda_ipc_core import BlockManager
    from ros2_cuda_ipc_msgs.msg import BufferCore

    rclpy.init()
    node = rclpy.create_node("ros2_cuda_ipc_demo_publisher")
    pub = node.create_publisher(BufferCore, TOPIC, _qos())
    with BlockManager(args.size_mib << 20, block_count=4, memory=args.memory, reuse_delay=0.05) as pool:
        node.get_logger().info(f"pool: {pool.block_count} {pool.memory} blocks of {pool.block_size >> 20} MiB, "
                               f"fds served at {pool.socket_path}")
        while pub.get_subscription_count() == 0:
            rclpy.spin_once(node, timeout_sec=0.05)
        time.sleep(0.5)
        message_bytes = 0
        for seq in range(args.frames):
            block = pool.acquire_for_publish(timeout=1.0)
            if block is None:
                node.get_logger().warning(f"frame {seq}: every block is still held by readers; skipped")
                continue
            with block:
                frame = block.view((args.size_mib << 20,), np.uint8)
                frame.fill(frame_value(seq))
                frame[:8] = np.frombuffer(np.uint64(seq).tobytes(), np.uint8)
                core = block.prepare_publish()
            message_bytes = len(serialize_message(core))
            pub.publish(core)
            time.sleep(1 / args.rate)
        time.sleep(0.5)
        print(json.dumps({"stats": pool.stats(), "message_bytes": message_bytes}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def run_subscriber(args: argparse.Namespace) -> None:
    import rclpy

    from ros2_cuda_ipc_core import Reader, Ros2CudaIpcError
    from ros2_cuda_ipc_msgs.msg import BufferCore

    rclpy.init()
    node = rclpy.create_node("ros2_cuda_ipc_demo_subscriber")
    reader = Reader()
    seen: dict[str, Any] = {"verified": 0, "bad": 0, "dropped": 0, "read_us": []}

    def on_frame(core: BufferCore) -> None:
        started = time.perf_counter()
        try:
            with reader.read(core) as handle:
                frame = handle.view((handle.byte_size,), np.uint8)
                seq = int(frame[:8].view(np.uint64)[0])
                good = bool((frame[8:] == frame_value(seq)).all()) and not frame.flags.writeable
                del frame
        except Ros2CudaIpcError as exc:
            seen["dropped"] += 1
            node.get_logger().warning(str(exc))
            return
        seen["read_us"].append((time.perf_counter() - started) * 1e6)
        seen["verified" if good else "bad"] += 1

    node.create_subscription(BufferCore, TOPIC, on_frame, _qos())
    deadline = time.monotonic() + args.frames / args.rate + 30
    while seen["verified"] + seen["bad"] + seen["dropped"] < args.frames and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    print(json.dumps({**seen, "read_us": float(np.median(seen["read_us"] or [0])), "stats": reader.stats()}),
          flush=True)
    node.destroy_node()
    rclpy.shutdown()


def run_demo(args: argparse.Namespace) -> int:
    print(f"demo: starting a subscriber and a publisher process; {args.frames} frames of {args.size_mib} MiB "
          f"at {args.rate:g} Hz on topic /{TOPIC}", flush=True)
    argv = ["--frames", str(args.frames), "--size-mib", str(args.size_mib), "--memory", args.memory,
            "--rate", str(args.rate)]
    pub, sub, pub_pid, sub_pid = run_roles(__file__, argv, timeout=args.frames / args.rate + 60)
    if pub is None or sub is None:
        print("demo: a process failed; see its log above", file=sys.stderr)
        return 1
    print(f"demo: publisher (pid {pub_pid}) published {pub['stats']['published']} frames; "
          f"each DDS message was {pub['message_bytes']} bytes, each frame {args.size_mib} MiB.")
    print(f"demo: subscriber (pid {sub_pid}) verified {sub['verified']} frames in the publisher's own memory "
          f"(read-only mapping, imported {sub['stats']['imports']} time(s)); {sub['bad']} wrong, {sub['dropped']} dropped; "
          f"median read + check {sub['read_us']:.0f} us per frame.")
    ok = sub["verified"] == pub["stats"]["published"] > 0 and sub["bad"] == 0
    print("demo: OK" if ok else "demo: FAILED")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--size-mib", type=int, default=8)
    parser.add_argument("--rate", type=float, default=30.0, help="frames per second")
    parser.add_argument("--memory", choices=["auto", "host", "cuda"], default="host")
    add_role_argument(parser, "demo")
    dispatch(parser.parse_args(argv), run_publisher, run_subscriber, run_demo)


if __name__ == "__main__":
    main()
