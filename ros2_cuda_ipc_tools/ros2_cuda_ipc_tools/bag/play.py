"""``bag_play BAG``: replay any rosbag2 bag; its ``Image`` and ``PointCloud2`` topics into GPU (or host) pools as
``GpuImage`` / ``GpuPointCloud2``, every other topic as it is, at the recorded timing scaled by ``--rate``,
header stamps kept.  An unreadable bag is one line and exit code 2; Ctrl-C or SIGTERM exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from ros2_cuda_ipc_core import CudaUnavailableError, InvalidDescriptorError, tool_parser

from .bag_errors import BagError
from .bag_source import BagSource
from .cli import number_argument, run_bag_tool
from .message_types import rclpy_class
from .republishers import CloudRepublisher, ImageRepublisher, RawRepublisher, Republisher

__all__ = ["main", "parse_args"]

_POOLED = {"sensor_msgs/msg/Image": ImageRepublisher, "sensor_msgs/msg/PointCloud2": CloudRepublisher}


def _remap(text: str) -> tuple[str, str]:
    old, sep, new = text.partition(":=")
    if not sep or not old or not new:
        raise argparse.ArgumentTypeError(f"{text!r} is not OLD:=NEW")
    return old, new


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = tool_parser(__name__, __doc__.split("\n\n")[0], prog="bag_play")
    parser.add_argument("bag", metavar="BAG", help="a rosbag2 bag directory, or one .mcap / .db3 file")
    parser.add_argument("-r", "--rate", type=number_argument(above=True), default=1.0, help="speed factor (default 1)")
    parser.add_argument("-l", "--loop", action="store_true", help="play again from the start at the end")
    parser.add_argument("--topics", nargs="+", default=[], metavar="TOPIC", help="only these topics")
    parser.add_argument("--remap", action="append", type=_remap, default=[], metavar="OLD:=NEW",
                        help="publish topic OLD as NEW (repeatable)")
    parser.add_argument("--memory", choices=("auto", "cuda", "host"), default="auto",
                        help="where the pools of images and clouds live (default auto: CUDA when usable)")
    parser.add_argument("--start-offset", type=number_argument(), default=0.0, metavar="S",
                        help="start this many seconds into the bag")
    parser.add_argument("--block-count", type=int, default=8, help="blocks per pool (default 8)")
    parser.add_argument("--wait-for-subscribers", type=number_argument(), default=0.0, metavar="S",
                        help="before playing, wait up to S seconds for every topic to have a subscriber")
    parser.add_argument("--linger", type=number_argument(), default=1.0, metavar="S",
                        help="keep the pools S seconds after the last message, for its readers (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)
    if args.block_count < 1:
        parser.error(f"--block-count {args.block_count}: at least 1")
    return args


class _Progress:
    """Messages played, dropped (no free block) and bad (not deserializable, or a geometry that does not add up)."""

    def __init__(self, duration_ns: int, quiet: bool) -> None:
        self.played = self.dropped = self.bad = 0
        self.duration = duration_ns / 1e9
        self.quiet = quiet
        self._next = time.monotonic() + 1.0

    def tick(self, position: float, force: bool = False) -> None:
        if self.quiet or (not force and time.monotonic() < self._next):
            return
        self._next = time.monotonic() + 1.0
        share = 100.0 * position / self.duration if self.duration > 0 else 100.0
        tty = sys.stderr.isatty()
        line = (f"bag_play {position:7.1f} / {self.duration:.1f} s ({share:3.0f}%) | played {self.played} | "
                f"dropped {self.dropped} | bad {self.bad}")
        sys.stderr.write(("\r\033[K" + line) if tty else line + "\n")
        sys.stderr.flush()


def _republishers(node: Any, source: BagSource, args: argparse.Namespace) -> dict[int, Republisher]:
    remap = dict(args.remap)
    out: dict[int, Republisher] = {}
    for connection in source.connections:
        topic = remap.get(connection.topic, connection.topic)
        pooled = _POOLED.get(connection.msgtype)
        if pooled is not None:
            republisher = pooled(node, topic, args.memory, args.block_count)
            first = source.first(connection)
            if first is not None:
                try:
                    republisher.prepare(first)
                except CudaUnavailableError as exc:
                    raise BagError(f"--memory {args.memory}: {exc}") from None
                except (InvalidDescriptorError, ValueError) as exc:
                    print(f"bag_play: {connection.topic}: the first message sizes no pool ({exc}); "
                          "the next one that does will", file=sys.stderr)
            out[connection.id] = republisher
            continue
        try:
            out[connection.id] = RawRepublisher(node, topic, rclpy_class(connection.msgtype))
        except BagError as exc:
            print(f"bag_play: {connection.topic} is not played: {exc}", file=sys.stderr)
    return out


def _wait_for_subscribers(republishers: dict[int, Republisher], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(r.subscription_count() == 0 for r in republishers.values()):
        time.sleep(0.05)


def play(args: argparse.Namespace) -> int:
    import rclpy

    source = BagSource(args.bag, args.topics)
    rclpy.init()
    node = rclpy.create_node("bag_play")
    republishers: dict[int, Republisher] = {}
    try:
        republishers = _republishers(node, source, args)
        _wait_for_subscribers(republishers, args.wait_for_subscribers)
        start = source.start_time + int(args.start_offset * 1e9)
        progress = _Progress(max(source.duration - int(args.start_offset * 1e9), 0), args.quiet)
        while True:
            _play_once(source, republishers, start, args.rate, progress)
            if not args.loop:
                break
        progress.tick(progress.duration, force=True)
        time.sleep(args.linger)  # a pool closed with the last frame would leave its readers nothing to read
    finally:
        for republisher in republishers.values():
            republisher.close()
        node.destroy_node()
        rclpy.try_shutdown()
        source.close()
    if not args.quiet:
        if sys.stderr.isatty():
            sys.stderr.write("\n")
        print(f"bag_play: {args.bag}: played {progress.played} messages, dropped {progress.dropped}, "
              f"bad {progress.bad}", flush=True)
    return 0


def _play_once(source: BagSource, republishers: dict[int, Republisher], start: int, rate: float,
               progress: _Progress) -> None:
    wall_start = time.monotonic()
    for connection, timestamp, data in source.messages(start):
        republisher = republishers.get(connection.id)
        if republisher is None:
            continue
        position = max(timestamp - start, 0) / 1e9
        delay = wall_start + position / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            if republisher.publish(data):
                progress.played += 1
            else:
                progress.dropped += 1
        except (InvalidDescriptorError, ValueError) as exc:
            progress.bad += 1
            if progress.bad == 1:
                print(f"bag_play: {connection.topic}: a message not played: {exc}", file=sys.stderr)
        progress.tick(position)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_bag_tool("bag_play", lambda: play(args))


if __name__ == "__main__":
    sys.exit(main())
