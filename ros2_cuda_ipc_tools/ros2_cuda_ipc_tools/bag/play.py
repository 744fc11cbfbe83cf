"""``bag_play BAG``: replay any rosbag2 bag; its ``Image`` and ``PointCloud2`` topics into GPU (or host) pools as
``GpuImage`` / ``GpuPointCloud2``, every other topic as it is, at the recorded timing scaled by ``--rate``,
header stamps kept.  A bag is untrusted: a topic it cannot play is one line saying so and the rest plays;
a bag that cannot be read at all is one line and exit code 2.  Ctrl-C or SIGTERM exits 0, after the summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ros2_cuda_ipc_core import (
    DEFAULT_MAX_FRAME_BYTES,
    CudaUnavailableError,
    InvalidDescriptorError,
    teardown_bounded,
    tool_parser,
)

from .bag_errors import BagError
from .bag_source import BagSource, BagTopicInfo, one_line
from .cli import number_argument, run_bag_tool
from .fd_budget import FdBudget
from .message_types import MessageTypes, rclpy_class
from .play_timing import PlayClock
from .republishers import CloudRepublisher, ImageRepublisher, RawRepublisher, Republisher
from .topic_names import full_topic_name
from .uploads import PoolUpload

__all__ = ["main", "parse_args"]

#: Seconds of waiting for subscribers after which the topics still without one are named.
_SAY_NONE_AFTER = 1.0
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
                        help="start this many seconds after the bag's first message")
    parser.add_argument("--block-count", type=int, default=8, help="blocks per pool (default 8)")
    parser.add_argument("--max-gap", type=number_argument(above=True), default=5.0, metavar="S",
                        help="a stretch of more than S seconds of bag time without a message is skipped, and said "
                             "(default 5): one outlier stamp cannot stall the replay")
    parser.add_argument("--max-frame-bytes", type=number_argument(int, 1), default=DEFAULT_MAX_FRAME_BYTES,
                        metavar="BYTES", help="refuse (count as bad) an image or cloud larger than this "
                                              f"(default {DEFAULT_MAX_FRAME_BYTES}, the bridges' max_frame_bytes)")
    parser.add_argument("--wait-for-matched", type=number_argument(), default=5.0, metavar="S",
                        help="before playing, wait up to S seconds (default 5) until every subscriber already "
                             "running is matched, so it gets the first message too; it ends as soon as they are "
                             "(0: play at once)")
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
    """Messages played, dropped (no free block) and bad (not the message its type says, too large, or a geometry
    that does not add up), and gaps skipped."""

    def __init__(self, duration_ns: int, quiet: bool) -> None:
        self.played = self.dropped = self.bad = self.gaps = 0
        self.duration = duration_ns / 1e9
        self.quiet = quiet
        self.started = time.monotonic()
        self._next = self.started + 1.0

    def tick(self, position: float, force: bool = False) -> None:
        if self.quiet or (not force and time.monotonic() < self._next):
            return
        self._next = time.monotonic() + 1.0
        share = min(100.0 * position / self.duration, 100.0) if self.duration > 0 else 100.0
        tty = sys.stderr.isatty()
        line = (f"bag_play {position:7.1f} / {self.duration:.1f} s ({share:3.0f}%) | played {self.played} | "
                f"dropped {self.dropped} | bad {self.bad}")
        sys.stderr.write(("\r\033[K" + line) if tty else line + "\n")
        sys.stderr.flush()

    def summary(self, bag: str, interrupted: bool) -> str:
        gaps = f", {self.gaps} gap{'s' if self.gaps != 1 else ''} skipped" if self.gaps else ""
        return (f"bag_play: {bag}: played {self.played} messages, dropped {self.dropped}, bad {self.bad}{gaps} "
                f"in {time.monotonic() - self.started:.2f} s{' (stopped)' if interrupted else ''}")


def _say(line: str) -> None:
    print(f"bag_play: {line}", file=sys.stderr, flush=True)


def _output_topic(node: Any, topic: str, remap: dict[str, str]) -> str:
    """The name ``topic`` is published as; BagError (the topic is skipped) for a name no ROS topic can have."""
    return full_topic_name(remap.get(topic, topic), node.resolve_topic_name)


class _Player:
    """The republishers of a bag's topics, made before playing: a topic that cannot be played is skipped, said."""

    def __init__(self, node: Any, source: BagSource, args: argparse.Namespace) -> None:
        self.node, self.source, self.args = node, source, args
        self.types = MessageTypes()
        self.republishers: dict[str, Republisher] = {}
        self.upload = PoolUpload()  # pinned staging for CUDA pools, a plain copy for host pools
        self.budget = FdBudget()
        self.plain: list[str] = []  # image and cloud topics past the budget, published as plain messages
        remap = dict(args.remap)
        for topic in source.topics.values():
            try:
                self.republishers[topic.name] = self._republisher(topic, _output_topic(node, topic.name, remap))
            except (BagError, OSError) as exc:  # OSError: the limits of this process (open files, memory)
                _say(f"{topic.name} ({topic.msgtype[:120]}) is skipped: "
                     f"{exc if isinstance(exc, BagError) else one_line(exc)}")
            except CudaUnavailableError as exc:  # not this topic's fault: the whole replay cannot be
                raise BagError(f"--memory {args.memory}: {exc}") from None
        if self.plain:
            named = ", ".join(self.plain[:3]) + (f" and {len(self.plain) - 3} more" if len(self.plain) > 3 else "")
            _say(f"{len(self.plain)} image or cloud topics are published as plain sensor_msgs, not through pools: "
                 f"their pools would pass this process's open-file limit ({self.budget.limit}, ulimit -n; "
                 f"{self.budget.per_pool} a pool): {named}")

    def _republisher(self, topic: BagTopicInfo, output: str) -> Republisher:
        pooled = _POOLED.get(topic.msgtype)
        self._check_definition(topic)
        if pooled is None:
            return RawRepublisher(self.node, output, rclpy_class(topic.msgtype))
        if not self.budget.grant():
            self.plain.append(topic.name)
            return RawRepublisher(self.node, output, rclpy_class(topic.msgtype))
        republisher = pooled(self.node, output, self.args.memory, self.args.block_count, self.upload,
                             self.args.max_frame_bytes)
        first = self.source.first(topic.name)
        if first is not None:
            try:
                before = self.budget.opened()
                republisher.prepare(first)
                self.budget.made(before)
            except (InvalidDescriptorError, ValueError) as exc:
                _say(f"{topic.name}: the first message sizes no pool ({one_line(exc)}); the next one that does will")
        return republisher

    def _check_definition(self, topic: BagTopicInfo) -> None:
        """A topic whose stored RIHS01 hash is not this system's for its type carries another message under
        that name: skipped (its bytes would be read as the wrong fields)."""
        if not topic.digest:
            return
        try:
            self.types.ensure(topic.msgtype)
            ours = self.types.store.hash_rihs01(topic.msgtype)
        except Exception:  # a type whose definition is not here: rclpy_class says so, or a bag of another distro
            return
        if ours != topic.digest:
            raise BagError(f"its definition in the bag ({topic.digest[:80]}) is not this system's {topic.msgtype} "
                           f"({ours})")

    def wait_for_matched(self, seconds: float) -> None:
        """Up to ``seconds``, until every subscription the graph shows on an output topic is matched with its
        publisher, and the graph has been seen: each topic has a subscriber (steady for 0.3 s), or other nodes are
        known and the topics without one stay so for 1 s.  Discovering the processes already running took
        1.5 to 3 s from a fresh process on a loaded 2-core machine (0.1 s on a quiet one); with no other node on
        the graph the whole wait is spent, since nothing tells "none" from "not seen yet".  Topics still without
        a subscriber after ``_SAY_NONE_AFTER`` s are named (one line), so a wait is never silent."""
        started = time.monotonic()
        deadline = started + seconds
        steady_since: float | None = None
        said = False
        while time.monotonic() < deadline:
            counts = [(self.node.count_subscribers(r.topic), r.subscription_count())
                      for r in self.republishers.values()]
            everyone = all(graph > 0 for graph, _ in counts)
            seen = everyone or len(self.node.get_node_names_and_namespaces()) > 1
            now = time.monotonic()
            if not said and now - started >= _SAY_NONE_AFTER and not everyone:
                said = True
                _say(f"no subscriber yet on {self._without_subscriber()}: waiting up to {deadline - now:.1f} s more "
                     "for one already running (--wait-for-matched 0 plays at once)")
            if not seen or any(graph > matched for graph, matched in counts):
                steady_since = None
            elif steady_since is None:
                steady_since = now
            elif now - steady_since >= (0.3 if everyone else 1.0):
                break
            time.sleep(0.05)
        if said and any(self.node.count_subscribers(r.topic) == 0 for r in self.republishers.values()):
            _say(f"playing with no subscriber on {self._without_subscriber()}")

    def _without_subscriber(self) -> str:
        """The output topics the graph shows no subscriber on (three named, then a count)."""
        topics = [r.topic for r in self.republishers.values() if self.node.count_subscribers(r.topic) == 0]
        return ", ".join(topics[:3]) + (f" and {len(topics) - 3} more" if len(topics) > 3 else "")

    def wait_for_subscribers(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(r.subscription_count() == 0 for r in self.republishers.values()):
            time.sleep(0.05)

    def play_once(self, progress: _Progress) -> None:
        messages = self._from_start()
        clock = PlayClock(self.args.rate, int(self.args.max_gap * 1e9))
        for topic, _, timestamp, data in messages:
            republisher = self.republishers.get(topic)
            if republisher is None:
                continue
            gap = clock.wait_for(timestamp)
            if gap is not None:
                progress.gaps += 1
                _say(f"{gap / 1e9:.3g} s of bag time without a message before {topic} (more than --max-gap "
                     f"{self.args.max_gap:g}): skipped")
            try:
                if republisher.publish(data):
                    progress.played += 1
                else:
                    progress.dropped += 1
            except (InvalidDescriptorError, ValueError, OSError) as exc:  # OSError: a pool this process cannot make
                progress.bad += 1
                if progress.bad == 1:
                    _say(f"{topic}: a message not played: {one_line(exc)} (further ones are counted as bad)")
            progress.tick(clock.position / 1e9)

    def _from_start(self) -> Iterator[tuple[str, str, int, bytes]]:
        """The bag's messages from ``--start-offset`` after its first one (not after the metadata's start time,
        which a bag may state wrongly); BagError when the offset is past the last one."""
        messages = self.source.messages()
        first = next(messages, None)
        if first is None:
            return
        if self.args.start_offset == 0:
            yield first
            yield from messages
            return
        later = self.source.messages(first[2] + int(self.args.start_offset * 1e9))
        message = next(later, None)
        if message is None:
            raise BagError(f"--start-offset {self.args.start_offset:g} s is past the bag's last message "
                           f"(the bag spans {self.source.duration / 1e9:.3g} s): nothing to play")
        yield message
        yield from later

    def close(self) -> None:
        for republisher in self.republishers.values():
            republisher.close()
        self.upload.close()


def play(args: argparse.Namespace) -> int:
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    source = BagSource(args.bag, args.topics, max_frame_bytes=args.max_frame_bytes, say=_say)
    for line in source.disagreements:
        _say(line)
    # No command line for rcl: it would read a NEW:=OLD of --remap as a deprecated remapping rule and warn.
    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("bag_play")
    player: _Player | None = None
    progress = _Progress(max(source.duration - int(args.start_offset * 1e9), 0), args.quiet)
    interrupted = False
    try:
        player = _Player(node, source, args)
        if not player.republishers:
            raise BagError(f"{args.bag}: no topic of the bag can be played")
        player.wait_for_matched(args.wait_for_matched)
        player.wait_for_subscribers(args.wait_for_subscribers)
        progress.started = time.monotonic()
        while True:
            player.play_once(progress)
            if not args.loop:
                break
        progress.tick(progress.duration, force=True)
        time.sleep(args.linger)  # a pool closed with the last frame would leave its readers nothing to read
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if player is not None:
            player.close()
        source.close()
        with teardown_bounded():
            node.destroy_node()
            rclpy.try_shutdown()
    if sys.stderr.isatty() and not args.quiet:
        sys.stderr.write("\n")
    print(progress.summary(args.bag, interrupted), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_bag_tool("bag_play", lambda: play(args))


if __name__ == "__main__":
    sys.exit(main())
