"""Where a direct frame's stamp -> callback time goes, boundary by boundary, across both processes: a developer's profile.

    python tools/profile_direct.py [--memory host|cuda] [--rate 30] [--count 200] [--size 1920x1080]
                                   [--executor single|events] [--json OUT]

Issue 33's direct row spends about 580 us from the producer's stamp to its consumer's callback on an H100, where a
bare descriptor's socket hop costs about 110 (``profile_delivery.py``'s ``socket-direct``). This splits it. A child
process publishes frames of an rgba8 ``ImagePublisher`` once per tick, idle in between, borrowed and filled before
the stamp as the benchmark's producer does (a host frame gets one pixel; a CUDA frame no fill); this process reads
them through an ``ImageSubscription`` with ``delivery="direct"`` while rclpy's executor spins the node, and its
callback only closes the view. Every time is CLOCK_REALTIME (``time.time_ns``), shared by both processes:

``stamp -> direct send``         the publisher: the message's fields, the block's readiness and lease (what the
                                 benchmark's ``send`` counts up to the direct record's write)
``send -> delivery thread reads``  the subscriber's delivery thread woken by the record (its ``select``) and given the GIL
``read -> frame handed over``    ``recv``, the record parsed, the frame handed to the subscription
``handed over -> callback``      the descriptor built, the frame's lease and read, its view made
``stamp -> callback``            the sum: the benchmark's ``arrival`` for the direct row

Each frame is matched across the processes by its uid and stamp; the warm-up's frames are left out. It wraps
private names by design (it is a profiler); nothing in the packages imports it. Ctrl-C or SIGTERM ends it with exit
status 0, and the publisher with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from step_timer import WARMUP_FRAMES, spin_until_subscribed

from ros2_cuda_ipc_core.measure_cost import percentile

TOPIC = "ros2_cuda_ipc_profile_direct/image"
BOUNDARIES = ("stamp -> direct send", "send -> delivery thread reads", "read -> frame handed over",
              "handed over -> callback")
TOTAL = "stamp -> callback"


def publish(memory: str, rate: float, count: int, width: int, height: int, out: str) -> int:
    """The publisher process: once a subscriber is matched (and 1 s more), ``count`` frames at ``rate`` Hz; writes
    each direct record's (uid, send time) to ``out``."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Header

    from ros2_cuda_ipc_core.direct.sender import DirectSender
    from ros2_cuda_ipc_image import ImagePublisher

    sends: list[tuple[int, int]] = []
    send = DirectSender.send

    def send_noted(self: Any, msg: Any, layout: Any) -> None:
        sends.append((int(msg.core.uid), time.time_ns()))
        send(self, msg, layout)

    DirectSender.send = send_noted  # type: ignore[method-assign]
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("profile_direct_publisher")
    camera = ImagePublisher(node, TOPIC, width=width, height=height, encoding="rgba8", memory=memory, fallback=False)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        spin_until_subscribed(executor, camera)
        period, start = 1.0 / rate, time.monotonic()
        for seq in range(count):
            frame = camera.borrow(timeout=1.0)
            if frame is None:
                print(f"profile_direct: frame {seq}: no free block", file=sys.stderr)
                continue
            with frame:
                if memory == "host":
                    frame.array[0, 0, 0] = seq % 256
                while time.monotonic() < start + seq * period:
                    executor.spin_once(timeout_sec=max(0.0, start + seq * period - time.monotonic()))
                header = Header()
                header.stamp.sec, header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
                frame.publish(header=header)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
    finally:
        with open(out, "w") as f:
            json.dump(sends, f)
        camera.close()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def profile(memory: str, rate: float, count: int, width: int, height: int, executor_kind: str) -> list[dict[str, float]]:
    """Run the publisher and the direct subscription; one row of boundaries (us) per matched frame after the warm-up."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from ros2_cuda_ipc_core import executor_factory
    from ros2_cuda_ipc_core.direct.receiver import DirectReceiver
    from ros2_cuda_ipc_core.typed.subscription import TypedSubscription
    from ros2_cuda_ipc_image import ImageSubscription

    reads: list[int] = []  # the delivery thread's reads of a channel (one per record here: one frame a tick)
    handed: dict[int, tuple[int, int]] = {}  # stamp -> (uid, time handed to the subscription)
    readable, on_direct_frame = DirectReceiver._readable, TypedSubscription._on_direct_frame

    def readable_noted(self: Any, channel: Any) -> None:
        reads.append(time.time_ns())
        readable(self, channel)

    def on_direct_frame_noted(self: Any, instance: Any, template: Any, frame: Any) -> Any:
        handed[frame.sec * 1_000_000_000 + frame.nanosec] = (int(frame.uid), time.time_ns())
        return on_direct_frame(self, instance, template, frame)

    DirectReceiver._readable = readable_noted  # type: ignore[method-assign]
    TypedSubscription._on_direct_frame = on_direct_frame_noted  # type: ignore[method-assign]
    called: list[tuple[int, int]] = []  # (stamp, callback time)
    done = threading.Event()

    def on_frame(view: Any) -> None:
        now = time.time_ns()
        called.append((view.header.stamp.sec * 1_000_000_000 + view.header.stamp.nanosec, now))
        view.close()
        if len(called) >= WARMUP_FRAMES + count:
            done.set()

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("profile_direct_subscriber")
    subscription = ImageSubscription(node, TOPIC, on_frame, delivery="direct", memory=memory)
    with tempfile.TemporaryDirectory() as folder:
        sends_file = os.path.join(folder, "sends.json")
        publisher = subprocess.Popen([sys.executable, __file__, "--publish", sends_file, "--memory", memory, "--rate",
                                      str(rate), "--count", str(WARMUP_FRAMES + count), "--size",
                                      f"{width}x{height}"])
        try:
            executor = executor_factory(executor_kind)()
            executor.add_node(node)
            deadline = time.monotonic() + (WARMUP_FRAMES + count) / rate + 60
            while not done.is_set() and time.monotonic() < deadline and publisher.poll() is None:
                executor.spin_once(timeout_sec=0.1)
            executor.remove_node(node)
            subscription.close()  # before the publisher closes its end: no "channel ended" warning
            publisher.wait(timeout=60)
        finally:
            if publisher.poll() is None:
                publisher.kill()
                publisher.wait()
            subscription.close()
            node.destroy_node()
            rclpy.try_shutdown()
        if publisher.returncode != 0:
            raise SystemExit(f"profile_direct: the publisher ended with exit status {publisher.returncode}")
        with open(sends_file) as f:
            sent = {uid: at for uid, at in json.load(f)}
    return _rows(called[WARMUP_FRAMES:WARMUP_FRAMES + count], handed, sent, sorted(reads))


def _rows(called: list[tuple[int, int]], handed: dict[int, tuple[int, int]], sent: dict[int, int],
          reads: list[int]) -> list[dict[str, float]]:
    import bisect

    rows = []
    for stamp, callback in called:
        uid, handed_at = handed.get(stamp, (None, 0))
        send = sent.get(uid) if uid is not None else None
        read = bisect.bisect_right(reads, handed_at) - 1  # the delivery thread's last read before the hand-over
        if send is None or read < 0 or reads[read] < send:
            continue
        times = (stamp, send, reads[read], handed_at, callback)
        row = {name: (times[i + 1] - times[i]) / 1e3 for i, name in enumerate(BOUNDARIES)}
        row[TOTAL] = (callback - stamp) / 1e3
        rows.append(row)
    return rows


def summary(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {name: {"n": len(rows), **{f"p{q}": round(percentile([row[name] for row in rows], q), 1)
                                       for q in (50, 90, 99)}} if rows else {"n": 0}
            for name in (*BOUNDARIES, TOTAL)}


def main() -> int:
    """Ctrl-C ends it with exit code 0."""
    from ros2_cuda_ipc_core import run_tool

    return run_tool(_main)


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory", choices=("host", "cuda"), default="host", help="the pool's (default: %(default)s)")
    parser.add_argument("--rate", type=float, default=30.0, help="frames a second (default: %(default)s)")
    parser.add_argument("--count", type=int, default=200, help="frames timed, after the warm-up (default: %(default)s)")
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT (default: %(default)s)")
    parser.add_argument("--executor", choices=("single", "events"), default="single",
                        help="what spins the subscriber's node (default: %(default)s, rclpy's stock executor)")
    parser.add_argument("--json", help="write the summary and every frame's row here too")
    parser.add_argument("--publish", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        width, height = (int(part) for part in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size {args.size!r}: expected WIDTHxHEIGHT, e.g. 1920x1080")
    if not (args.rate > 0 and args.count > 0 and width > 0 and height > 0):
        parser.error("--rate, --count and --size take positive numbers")
    if args.publish:
        return publish(args.memory, args.rate, args.count, width, height, args.publish)
    rows = profile(args.memory, args.rate, args.count, width, height, args.executor)
    cells = summary(rows)
    print(f"profile_direct: {args.memory} {width}x{height} rgba8 at {args.rate:g} Hz, executor {args.executor}, "
          f"{len(rows)} of {args.count} frames matched (us)")
    print(f"  {'boundary':32} {'p50':>8} {'p90':>8} {'p99':>8}")
    for name, cell in cells.items():
        if cell["n"]:
            print(f"  {name:32} {cell['p50']:8.1f} {cell['p90']:8.1f} {cell['p99']:8.1f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"memory": args.memory, "size": [width, height], "rate": args.rate, "executor": args.executor,
                       "summary": cells, "frames": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
