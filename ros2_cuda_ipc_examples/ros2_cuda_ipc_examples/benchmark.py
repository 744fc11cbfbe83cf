"""One-way latency, publish to consumer-ready, of frames through ros2_cuda_ipc against a bare descriptor.

    ros2 run ros2_cuda_ipc_examples benchmark [--memory cuda] [--sizes-mib 8 33] [--count 300]

Two real processes.  For each frame size the publisher fills a block (and waits for the fill,
so the fill is not counted), stamps CLOCK_MONOTONIC, publishes; the subscriber reads it on its
own stream, waits until that stream may use the frame, and stamps again.  The baseline is the
same GpuImage message with no frame behind it.  All modes run interleaved in one run, so the
ratios compare like with like on a shared, noisy machine.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ros2_cuda_ipc_examples.two_process import add_role_argument, dispatch, run_roles

TOPIC = "ros2_cuda_ipc_benchmark/frames"
BASELINE = "descriptor"


def _qos():
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy

    return QoSProfile(depth=50, reliability=QoSReliabilityPolicy.RELIABLE)


def _stamp(msg, nanoseconds: int) -> None:
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(nanoseconds, 1_000_000_000)


def _cuda_stream(device: int):
    from cuda.core import Device

    dev = Device(device)
    dev.set_current()
    return dev.create_stream()


def run_publisher(args: argparse.Namespace) -> None:
    import rclpy

    from ros2_cuda_ipc_core import BlockManager
    from ros2_cuda_ipc_msgs.msg import GpuImage

    rclpy.init()
    node = rclpy.create_node("ros2_cuda_ipc_benchmark_publisher")
    pub = node.create_publisher(GpuImage, TOPIC, _qos())
    pools = {size: BlockManager(size << 20, block_count=4, memory=args.memory, reuse_delay=0.0) for size in args.sizes_mib}
    stream = _cuda_stream(0) if args.memory == "cuda" else None
    while pub.get_subscription_count() == 0:
        rclpy.spin_once(node, timeout_sec=0.05)
    time.sleep(1.0)
    modes = [BASELINE, *map(str, args.sizes_mib)]
    for index in range(args.count * len(modes)):
        mode = modes[index % len(modes)]
        msg = GpuImage()
        msg.header.frame_id = mode
        if mode != BASELINE:
            pool = pools[int(mode)]
            block = pool.acquire_for_publish(timeout=1.0)
            if block is None:
                continue
            with block:
                _fill(block, index, stream)
                _stamp(msg, time.monotonic_ns())
                msg.core = block.prepare_publish(stream)
        else:
            _stamp(msg, time.monotonic_ns())
        pub.publish(msg)
        time.sleep(1 / args.rate)
    end = GpuImage()
    end.header.frame_id = "end"
    for _ in range(20):
        pub.publish(end)
        time.sleep(0.05)
    for pool in pools.values():
        pool.close()
    print(json.dumps({"sent": args.count * len(modes)}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def _fill(block, value: int, stream) -> None:
    if block.memory == "cuda":
        from cuda.bindings import driver

        driver.cuMemsetD8Async(block.device_ptr, value & 255, block.capacity, int(stream.handle))
        stream.sync()
    else:
        block.view((block.capacity,), np.uint8).fill(value & 255)


def run_subscriber(args: argparse.Namespace) -> None:
    import rclpy

    from ros2_cuda_ipc_core import Reader
    from ros2_cuda_ipc_msgs.msg import GpuImage

    rclpy.init()
    node = rclpy.create_node("ros2_cuda_ipc_benchmark_subscriber")
    reader = Reader()
    stream = _cuda_stream(0) if args.memory == "cuda" else None
    latencies: dict[str, list[float]] = {}
    done = []

    def on_msg(msg: GpuImage) -> None:
        if msg.header.frame_id == "end":
            done.append(True)
            return
        arrived = ready = time.monotonic_ns()
        if msg.header.frame_id != BASELINE:
            with reader.read(msg.core, stream):
                if stream is not None:
                    stream.sync()  # consumer-ready: the consumer's stream has passed the producer's event
                ready = time.monotonic_ns()
        sent = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        latencies.setdefault(msg.header.frame_id, []).append((ready - sent) / 1000)
        latencies.setdefault(msg.header.frame_id + " dds", []).append((arrived - sent) / 1000)

    node.create_subscription(GpuImage, TOPIC, on_msg, _qos())
    deadline = time.monotonic() + args.count * (len(args.sizes_mib) + 1) / args.rate + 60
    while not done and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    summary = {mode: {"n": len(v), "p50_us": float(np.percentile(v, 50)), "p99_us": float(np.percentile(v, 99))}
               for mode, v in latencies.items()}
    print(json.dumps(summary), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def run_benchmark(args: argparse.Namespace) -> int:
    print(f"benchmark: {args.count} messages per mode ({BASELINE} + {args.sizes_mib} MiB {args.memory} frames), "
          f"interleaved at {args.rate:g} Hz", flush=True)
    argv = ["--memory", args.memory, "--count", str(args.count), "--rate", str(args.rate),
            "--sizes-mib", *map(str, args.sizes_mib)]
    _, summary, _, _ = run_roles(__file__, argv, timeout=args.count * (len(args.sizes_mib) + 1) / args.rate + 60)
    if summary is None:
        return 1
    base_p50, base_p99 = summary[BASELINE]["p50_us"], summary[BASELINE]["p99_us"]
    print(f"{'mode':>16} {'n':>5} {'p50 us':>9} {'p99 us':>9} {'p50 ratio':>10} {'p99 ratio':>10}")
    for mode, row in summary.items():
        label = mode if mode.split()[0] == BASELINE else f"{mode} MiB".replace(" dds MiB", " MiB dds")
        print(f"{label:>16} {row['n']:>5} {row['p50_us']:>9.1f} {row['p99_us']:>9.1f} "
              f"{row['p50_us'] / base_p50:>10.2f} {row['p99_us'] / base_p99:>10.2f}")
    return 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory", choices=["host", "cuda"], default="cuda")
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[8, 33])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--rate", type=float, default=100.0)
    add_role_argument(parser, "benchmark")
    dispatch(parser.parse_args(argv), run_publisher, run_subscriber, run_benchmark)


if __name__ == "__main__":
    main()
