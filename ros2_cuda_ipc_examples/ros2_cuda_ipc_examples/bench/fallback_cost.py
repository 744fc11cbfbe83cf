"""What a CPU twin subscriber costs the zero-copy readers: their latency with none, a raw and a JPEG twin subscriber.

    python -m ros2_cuda_ipc_examples.bench.fallback_cost --size 1080p --fps 30 --seconds 8

One run, three phases of ``--seconds`` each: a camera-like publisher (this process) and a zero-copy
``ImageSubscription`` (a process of its own) throughout; a ``sensor_msgs/Image`` twin subscriber
(another process) during the second phase, a ``CompressedImage`` one during the third.  Each phase is
steady state: it starts once the twin has published its first message (the JPEG encoder's warm-up, timed
and shown apart) and, for the first, after a second of frames.  The reader's latency from the frame's
stamp, p50 / p99 per phase, the publisher process's CPU per frame and the twins' counters (frames
twinned, dropped while the worker was busy) are printed as a table.  Ratios within one run are what it
measures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import run_tool, stop_reason, tool_parser
from ros2_cuda_ipc_tools import PARENT_PID_VARIABLE, follow_runner

SIZES = {"vga": (640, 480), "720p": (1280, 720), "1080p": (1920, 1080), "4k": (3840, 2160)}
TOPIC = "fallback_cost_frames"
PHASES = ("none", "raw", "compressed")


def _parser() -> argparse.ArgumentParser:
    parser = tool_parser(__name__, __doc__.split("\n\n")[0], prog="fallback_cost")
    parser.add_argument("--size", choices=sorted(SIZES), default="1080p", help="frame size, rgb8 (default 1080p)")
    parser.add_argument("--fps", type=float, default=30.0, help="frames a second (default 30)")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase (default 8)")
    parser.add_argument("--memory", choices=("auto", "host", "cuda"), default="auto", help="the publisher's pool")
    parser.add_argument("--role", choices=("reader", "twin", "twin-compressed"), help=argparse.SUPPRESS)
    return parser


def _reader() -> int:
    """Latency of every frame from its stamp, by phase (the frame_id), until a frame named 'stop'."""
    import rclpy

    from ros2_cuda_ipc_image import ImageSubscription

    rclpy.init()
    node = rclpy.create_node("fallback_cost_reader")
    latencies: dict[str, list[float]] = {}
    done = []

    def on_view(view: Any) -> None:
        stamp = view.header.stamp
        ms = (time.time_ns() - (stamp.sec * 1_000_000_000 + stamp.nanosec)) / 1e6
        latencies.setdefault(view.header.frame_id, []).append(ms)
        done.append(view.header.frame_id == "stop")
        view.close()

    subscription = ImageSubscription(node, TOPIC, on_view, 10)
    while not (done and done[-1]):
        rclpy.spin_once(node, timeout_sec=0.1)
    print(json.dumps({"latencies": latencies, "paths": subscription.stats()["frames"]}), flush=True)
    return 0


def _twin(compressed: bool) -> int:
    """A plain sensor_msgs subscriber of the twin, as rqt_image_view would be, until stopped."""
    import rclpy
    from sensor_msgs.msg import CompressedImage, Image

    rclpy.init()
    node = rclpy.create_node("fallback_cost_twin")
    message = CompressedImage if compressed else Image
    node.create_subscription(message, f"{TOPIC}/cpu" + ("/compressed" if compressed else ""), lambda msg: None, 2)
    rclpy.spin(node)
    return 0


def _spawn(role: str) -> subprocess.Popen:
    """A reader or twin process; it ends with this one, even one killed (``PR_SET_PDEATHSIG``: see parent_watch)."""
    module = "ros2_cuda_ipc_examples.bench.fallback_cost"
    return subprocess.Popen([sys.executable, "-m", module, "--role", role], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, PARENT_PID_VARIABLE: str(os.getpid())})


def _run(options: argparse.Namespace) -> int:
    import rclpy

    from ros2_cuda_ipc_image import ImagePublisher

    width, height = SIZES[options.size]
    rclpy.init()
    node = rclpy.create_node("fallback_cost_camera")
    pub = reader = twin = None
    rows: list[dict[str, Any]] = []
    try:
        pub = ImagePublisher(node, TOPIC, width=width, height=height, encoding="rgb8", memory=options.memory,
                             block_count=6)
        reader = _spawn("reader")
        picture = (np.arange(height * width * 3, dtype=np.uint32) % 251).astype(np.uint8).reshape(height, width, 3)
        _wait(node, lambda: pub.subscription_count > 0, 30, "the zero-copy reader")
        for phase in PHASES:
            if phase != "none":
                twin = _spawn("twin" if phase == "raw" else "twin-compressed")
                _wait(node, lambda: any(pub.twins.subscription_counts().values()) if pub.twins else False, 30,
                      f"the {phase} twin subscriber")
            warm_up_s = _warm_up(node, pub, picture, PHASES.index(phase), options.fps)
            before, cpu = pub.fallback_stats(), time.process_time()
            frames = _publish_for(node, pub, picture, phase, options.fps, options.seconds)
            after = pub.fallback_stats()
            rows.append({"phase": phase, "warm_up_s": warm_up_s, "cpu_ms": (time.process_time() - cpu) * 1e3 / frames,
                         **{k: after[k] - before[k] for k in ("leased", "encodes", "busy_drops")}})
            if twin is not None:
                twin.terminate()
                twin.wait()
                twin = None
                _wait(node, lambda: not any(pub.twins.subscription_counts().values()) if pub.twins else True, 30,
                      "the twin subscriber to leave")
        _publish_for(node, pub, picture, "stop", options.fps, 1.0 / options.fps)
        result = json.loads(reader.communicate(timeout=60)[0].strip().splitlines()[-1])
    except KeyboardInterrupt as stop:  # the reader's latencies come at the end only: nothing to show
        print(f"fallback_cost: interrupted by {stop_reason(stop)} after {len(rows)} of {len(PHASES)} phases: no table "
              "(the reader reports its latencies at the end)", flush=True)
        return 0
    finally:
        for proc in (reader, twin):
            if proc is not None:
                proc.kill()
                proc.wait()
        if pub is not None:
            pub.close()
        node.destroy_node()
        rclpy.try_shutdown()
    print(f"fallback_cost: {width}x{height} rgb8 at {options.fps:g} fps, {pub.pool.memory} memory, "
          f"{options.seconds:g} s a phase; the zero-copy reader's latency from the stamp:")
    print(f"  {'twin subscriber':<16} {'frames':>6} {'p50 ms':>8} {'p99 ms':>8} {'twinned':>8} {'JPEGs':>6} {'dropped':>8} "
          f"{'CPU ms/frame':>13} {'warm-up s':>10}")
    for row in rows:
        got = np.array(result["latencies"].get(row["phase"], [np.nan]))
        print(f"  {row['phase']:<16} {len(got):>6} {np.percentile(got, 50):>8.2f} {np.percentile(got, 99):>8.2f} "
              f"{row['leased']:>8} {row['encodes']:>6} {row['busy_drops']:>8} {row['cpu_ms']:>13.2f} "
              f"{row['warm_up_s']:>10.2f}")
    return 0


def _wait(node: Any, done: Any, timeout: float, what: str) -> None:
    import rclpy

    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"fallback_cost: waited {timeout:g} s for {what}")
        rclpy.spin_once(node, timeout_sec=0.05)


def _warm_up(node: Any, pub: Any, picture: np.ndarray, phase: int, fps: float) -> float:
    """Frames (named 'warmup', not measured) until phase ``phase``'s twin published its first message, or a
    second of them for the phase without a twin; the seconds it took."""
    started = time.monotonic()
    if phase == 0:
        _publish_for(node, pub, picture, "warmup", fps, 1.0)
        return time.monotonic() - started
    published = f"published {pub.twins.topics[phase - 1]}"
    first = pub.fallback_stats()[published]
    while pub.fallback_stats()[published] == first:
        if time.monotonic() - started > 120:
            raise SystemExit(f"fallback_cost: the twin published nothing in 120 s: {pub.fallback_stats()}")
        _publish_for(node, pub, picture, "warmup", fps, 1.0 / fps)
    return time.monotonic() - started


def _publish_for(node: Any, pub: Any, picture: np.ndarray, phase: str, fps: float, seconds: float) -> int:
    """Publish ``picture`` at ``fps`` for ``seconds`` (at least one frame), its frame_id ``phase``: the count."""
    import rclpy
    from std_msgs.msg import Header

    period, start = 1.0 / fps, time.monotonic()
    tick, count = start, 0
    while tick - start < seconds:
        header = Header(frame_id=phase)
        header.stamp = node.get_clock().now().to_msg()
        pub.publish_array(picture, header=header)
        count += 1
        tick += period
        while time.monotonic() < tick:
            rclpy.spin_once(node, timeout_sec=max(0.0, tick - time.monotonic()))
    return count


def main(argv: list[str] | None = None) -> None:
    options = _parser().parse_args(argv)
    follow_runner()  # a reader or twin: ends with the run that started it
    if options.role == "reader":
        raise SystemExit(run_tool(_reader))
    if options.role is not None:
        raise SystemExit(run_tool(lambda: _twin(options.role == "twin-compressed")))
    raise SystemExit(run_tool(lambda: _run(options)))


if __name__ == "__main__":
    main()
