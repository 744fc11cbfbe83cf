"""Does a direct subscription's callback wait for the GIL behind the executor's thread?  A developer's probe.

    python tools/profile_gil_wait.py [--rate 30] [--count 200] [--wait-us 400] [--rows ...] [--json OUT]

On the H200 a direct subscriber's ``wait`` (its stream's ``synchronize``) took ~780 us on rclpy's Python
executor and ~240 us on its C++ events executor, for the same frames.  The reading: ``synchronize`` releases the
GIL; meanwhile the frame's DDS copy reaches the executor's thread, which takes the GIL for its Python turn (wait
set, take, the duplicate dropped); the callback's thread, its wait over, waits for that turn to end.  This probe
checks that reading without a GPU: real processes, a typed host-memory publisher and an ``ImageSubscription``
with ``delivery="direct"``; the callback stands in for ``synchronize`` with a GIL-free ``time.sleep`` of
``--wait-us`` and records how much longer than asked it took (the overshoot), and whether the frame's DDS copy was
taken during it.

Rows, each a fresh publisher process and subscription, one after the other:

``alone``              after the warm-up no executor spins while the callback waits (before session 18 the DDS
                       copies waited in the middleware): the sleep's own overshoot, the baseline.
``single``             rclpy's ``SingleThreadedExecutor`` spins on the main thread (the default), with the
                       switch interval the direct subscription sets (core's ``direct/switch_interval.py``: 50 us).
``events``             rclpy's C++ ``EventsExecutor`` (where this rclpy has it).
``single-switch-N``    ``single`` with ``sys.setswitchinterval(N us)`` set after the subscription is made: how long
                       a thread that wants the GIL lets the holder run before asking it to let go (5,000: Python's
                       default, what the direct path had before it set its own).
``single-ab``          ``single`` with the interval alternated frame by frame, 50 and 5,000 us (set after each
                       callback for the next frame): the two compared under the same conditions, in one run.

Per row: the overshoot's p50 / p90 / max in us over the frames after ``--warmup``, apart for frames whose DDS copy
was taken while their callback slept and for the others; and the time from the publisher's stamp to the wait's end
(what a consumer-ready time would be), which also counts what the GIL costs the frame before its callback.
Since session 18 a direct subscription's DDS reader is on a hidden node no executor spins, and its delivery thread
takes the copies between callbacks (core's ``direct/dds_leg.py``): no row should count a copy taken during a wait,
and ``single`` should come down to ``alone``.  The rows stay, to show that on any machine.
It reaches no private names of ours; nothing in the packages imports it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

TOPIC = "ros2_cuda_ipc_profile_gil_wait/image"
ROWS = ("alone", "single", "events", "single-switch-5000", "single-switch-20", "single-ab")
#: The switch intervals ``single-ab`` alternates frame by frame (us): the direct receiver's and Python's default.
AB_INTERVALS = (50, 5000)
WIDTH, HEIGHT = 640, 480


def publish(rate: float, count: int) -> int:
    """The publisher process: once a subscriber is matched (and 1 s more), ``count`` frames at ``rate`` Hz."""
    import numpy as np
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Header
    from step_timer import spin_until_subscribed

    from ros2_cuda_ipc_image import ImagePublisher

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # a stop is run_tool's: exit 0
    node = rclpy.create_node("profile_gil_wait_publisher")
    camera = ImagePublisher(node, TOPIC, width=WIDTH, height=HEIGHT, encoding="rgb8", memory="host", fallback=False)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin_until_subscribed(executor, camera)
    picture = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    period, start = 1.0 / rate, time.monotonic()
    for seq in range(count):
        while time.monotonic() < start + seq * period:
            executor.spin_once(timeout_sec=max(0.0, start + seq * period - time.monotonic()))
        picture[0, 0, 0] = seq % 256
        header = Header()
        header.stamp.sec, header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
        if camera.publish_array(picture, header=header) is None:
            print(f"frame {seq}: no free block", file=sys.stderr)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
    node.destroy_node()
    rclpy.shutdown()
    return 0


def run_row(row: str, rate: float, count: int, wait_us: float,
            warmup: int) -> list[tuple[float, bool, float, int]]:
    """One row, per frame: the overshoot (us), whether the frame's DDS copy was taken during its callback's wait, and
    publish to the wait's end (us, the stamp's clock), and the switch interval it had (us)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from ros2_cuda_ipc_core import executor_factory
    from ros2_cuda_ipc_image import ImageSubscription

    switch = sys.getswitchinterval()
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("profile_gil_wait_subscriber")
    samples: list[tuple[float, bool, float, int]] = []
    done = threading.Event()

    def dds_copies() -> int:  # taken (before session 18 by the executor's thread), each dropped as a duplicate
        return int(subscription.stats()["arrived"].get("dds", 0))

    def on_frame(view: Any) -> None:
        before = dds_copies()
        interval = round(sys.getswitchinterval() * 1e6)  # what this frame was received and waited with
        began = time.perf_counter_ns()
        time.sleep(wait_us / 1e6)  # GIL released, as a stream's synchronize releases it
        took = (time.perf_counter_ns() - began) / 1e3
        ready = (time.time_ns() - (view.header.stamp.sec * 1_000_000_000 + view.header.stamp.nanosec)) / 1e3
        view.close()
        samples.append((took - wait_us, dds_copies() != before, ready, interval))
        if row == "single-ab":
            sys.setswitchinterval(AB_INTERVALS[len(samples) % 2] / 1e6)
        if len(samples) >= count:
            done.set()

    subscription = ImageSubscription(node, TOPIC, on_frame, delivery="direct", memory="host")
    if row.startswith("single-switch-"):
        sys.setswitchinterval(int(row.rsplit("-", 1)[1]) / 1e6)
    elif row == "single-ab":
        sys.setswitchinterval(AB_INTERVALS[0] / 1e6)
    publisher = subprocess.Popen([sys.executable, __file__, "--publish", "--rate", str(rate), "--count",
                                  str(count + 2)])
    try:
        executor = SingleThreadedExecutor() if row in ("alone", "single") or row.startswith("single-") \
            else executor_factory(row)()
        executor.add_node(node)
        deadline = time.monotonic() + count / rate + 60
        # Every row spins through its warm-up (before session 18 the direct channel opened on a DDS descriptor the
        # executor took); "alone" then stops, and no executor runs beside the callbacks.  It stops two frames before the
        # warm-up ends, in turns of 5 ms: a turn still under way when the first measured frame came took its copy.
        turn = 0.005 if row == "alone" else 0.1
        while not done.is_set() and time.monotonic() < deadline and (row != "alone" or len(samples) < warmup - 2):
            executor.spin_once(timeout_sec=turn)
        done.wait(timeout=max(0.0, deadline - time.monotonic()))
        executor.remove_node(node)
    finally:
        try:
            publisher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            publisher.kill()
            publisher.wait()
        subscription.close()
        node.destroy_node()
        rclpy.shutdown()
        sys.setswitchinterval(switch)
    return samples[:count]  # the publisher sends two more: a row ends at its count


def summary(samples: list[tuple[float, bool, float, int]], warmup: int) -> dict[str, Any]:
    steady = samples[warmup:]

    def stats(values: list[float]) -> dict[str, Any]:
        if not values:
            return {"n": 0}
        ordered = sorted(values)
        return {"n": len(ordered), "p50": round(statistics.median(ordered), 1),
                "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1), "max": round(ordered[-1], 1)}

    return {"all": stats([o for o, _, _, _ in steady]),
            "copy_taken_during_wait": stats([o for o, c, _, _ in steady if c]),
            "no_copy_during_wait": stats([o for o, c, _, _ in steady if not c]),
            "publish_to_wait_end": stats([r for _, _, r, _ in steady])}


def main() -> int:
    """Ctrl-C ends it with exit code 0 (the rows done so far printed)."""
    from ros2_cuda_ipc_core import run_tool

    return run_tool(_main)


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=30.0, help="frames a second (default: %(default)s)")
    parser.add_argument("--count", type=int, default=200, help="frames a row (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=20, help="first frames left out, at least 3 (default: "
                        "%(default)s)")
    parser.add_argument("--wait-us", type=float, default=400.0, help="the GIL-free wait standing in for a "
                        "stream's synchronize (default: %(default)s)")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--publish", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warmup < 3:
        parser.error("--warmup must be at least 3: the direct channel opens, and 'alone' stops spinning, in it")
    if args.publish:
        return publish(args.rate, args.count)
    results = {}
    for row in args.rows:
        samples = run_row(row, args.rate, args.count, args.wait_us, args.warmup)
        if row == "single-ab":  # one result per interval, its frames' warm-up left out as a whole row's
            steady = samples[args.warmup:]
            parts = {f"{row}-{us}": summary([sample for sample in steady if sample[3] == us], 0)
                     for us in AB_INTERVALS}
        else:
            parts = {row: summary(samples, args.warmup)}
        for name, cells in parts.items():
            results[name] = cells
            print(f"{name:<20} " + "  ".join(
                f"{key}: n {c['n']}" + (f" p50 {c['p50']} p90 {c['p90']} max {c['max']}" if c["n"] else "")
                for key, c in cells.items()), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"wait_us": args.wait_us, "rate": args.rate, "rows": results}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
