"""The two bridge nodes every typed package offers, once: typed messages to their ``sensor_msgs`` twin and back.

A typed package subclasses them with its reader and conversion (``DownloadBridge``) or its publisher
factory and upload (``UploadBridge``); the rest (when to download, counting, logging, what a bad message
costs) is the same for images and point clouds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from traceback import format_exception
from typing import Any, Generic, TypeVar, cast

from rclpy.node import Node

from ..errors import InvalidDescriptorError, Ros2CudaIpcError
from ..memory import cuda_driver
from ..node.parameters import NodeParameter, ParameterError, declare, not_negative, positive
from ..node.topic_check import check_topic
from ..pool.block_manager import DEFAULT_REUSE_DELAY, MemoryKind, check_reuse_delay
from .publisher import TypedPublisher
from .reader import TypedReader
from .view import TypedView

P = TypeVar("P", bound=TypedPublisher[Any, Any])
V = TypeVar("V", bound=TypedView[Any])

#: Default of the ``max_frame_bytes`` parameter: far above any camera frame or LiDAR scan of today.
DEFAULT_MAX_FRAME_BYTES = 1 << 28


def check_frame_bytes(claimed: int, limit: int, what: str) -> None:
    """Refuse a message whose claims would make a ``claimed``-byte frame when the bridge allows ``limit``."""
    if claimed > limit:
        raise InvalidDescriptorError(f"{what} claims {claimed} bytes, more than this bridge's max_frame_bytes "
                                     f"({limit}); raise the parameter if such frames are real")


class _MessageGuard:
    """How a bridge takes a message that fails: counted, logged at most every 5 s, and the bridge goes on.

    A ``Ros2CudaIpcError`` or ``ValueError`` is a message we refuse (a warning); anything else is a bug of
    ours that a message found (an error with its traceback), and still never ends the node.
    """

    def __init__(self, node: Node, item: str) -> None:
        self._node, self._item = node, item
        self.dropped = 0  #: every message that did not go out
        self.refused = 0  #: of those, the ones refused for what they claim (not a stale frame or a pool gone)

    def __enter__(self) -> _MessageGuard:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        self.dropped += 1
        logger = self._node.get_logger()
        if isinstance(exc, ValueError):  # InvalidDescriptorError is one: what the message claims is wrong
            self.refused += 1
        if isinstance(exc, (Ros2CudaIpcError, ValueError)):
            logger.warning(f"{self._item} dropped: {exc}", throttle_duration_sec=5.0)
        else:
            logger.error(f"{self._item} dropped by an unexpected error: {''.join(format_exception(exc))}",
                         throttle_duration_sec=5.0)
        return True


class _Counted:
    """What both bridges report of the messages they could not pass on."""

    _guard: _MessageGuard

    @property
    def dropped(self) -> int:
        """Messages refused, failed or (uploads) without a free block: counted, logged (rate-limited), never raised."""
        return self._guard.dropped

    @property
    def refused(self) -> int:
        """Of :attr:`dropped`, the messages refused for what they claim."""
        return self._guard.refused


_MAX_FRAME_BYTES = NodeParameter("max_frame_bytes", DEFAULT_MAX_FRAME_BYTES,
                                 "largest frame a message may claim, in bytes: one claiming more is refused")


def _max_frame_bytes(node: Node) -> int:
    limit: int = declare(node, "max_frame_bytes")
    if limit <= 0:
        raise ParameterError(f"max_frame_bytes must be a positive integer of bytes, not {limit}")
    return limit


class DownloadBridge(_Counted, Node, Generic[V]):
    """Typed messages on ``in_topic`` to plain messages on ``out_topic``, one download each.

    Downloads only while the output has subscribers, at most ``max_rate`` Hz (a parameter; 0 means every
    message); a message that cannot be read, or whose download would exceed ``max_frame_bytes`` (a parameter,
    checked from the message's claims before anything is read or allocated), is counted and logged, never
    raised.  Logs its counts every ``stats_period`` seconds (a parameter).  Subclasses say how many bytes a
    message's download makes (``output_bytes``).
    """

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("max_rate", 0.0, "downloads a second at most (0: every message)"),
        NodeParameter("stats_period", 10.0, "seconds between two lines of counts in the log"),
        NodeParameter("diagnostics", True, "report the pools and readers on /diagnostics once a second"),
        _MAX_FRAME_BYTES,
    )

    def __init__(self, node_name: str, reader: TypedReader[Any, Any, V], convert: Callable[[V], Any],
                 in_type: type, in_topic: str, out_type: type, out_topic: str, item: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        declare(self, "diagnostics")  # before the reader reports (it reads the parameter)
        self.max_rate = not_negative("max_rate", declare(self, "max_rate"))
        stats_period = positive("stats_period", declare(self, "stats_period"))
        self.max_frame_bytes = _max_frame_bytes(self)
        self.reader = reader
        reader.report_to(self, in_topic)
        self.converted = self.skipped = 0
        self._guard = _MessageGuard(self, item)
        self._convert = convert
        self._item = item
        self._last = 0.0
        self._out: Any = self.create_publisher(out_type, out_topic, 10)
        self._topic_check = check_topic(self, in_topic, in_type)  # a misspelt remapping, or a topic of another type
        self.create_subscription(in_type, in_topic, self._on_message, 10)
        self.create_timer(stats_period, self._log_stats)

    def output_bytes(self, msg: Any) -> int:
        """Bytes of the plain message ``msg``'s download would make, by its own claims (before any read)."""
        raise NotImplementedError

    @property
    def listeners(self) -> int:
        """Subscribers of the output: with none, nothing is downloaded."""
        return int(self._out.get_subscription_count())

    def _log_stats(self) -> None:
        self.get_logger().info(f"converted {self.converted}, skipped {self.skipped}, dropped {self.dropped} "
                               f"(refused {self.refused}); reader {self.reader.stats()}")

    def _on_message(self, msg: Any) -> None:
        self._topic_check.cancel()
        now = time.monotonic()
        if self.listeners == 0 or (self.max_rate > 0 and now - self._last < 1.0 / self.max_rate):
            self.skipped += 1
            return
        with self._guard:
            check_frame_bytes(self.output_bytes(msg), self.max_frame_bytes, f"a {type(msg).__name__}")
            with self.reader.read(msg) as view:
                out = self._convert(view)
            self._last = now
            self._out.publish(out)
            self.converted += 1


class UploadBridge(_Counted, Node, Generic[P]):
    """Plain messages on ``in_topic`` to typed messages, one upload each, through a publisher of this node.

    Subclasses say how a message's claims are checked against the bytes it carries (``check``, before
    anything is sized by them), whether a message fits the current publisher (``fits``), how to make one sized
    by a message (``make_publisher``; the first message and any that does not fit get a new one, the old one is
    closed) and how to upload (``upload``).  Parameters:
    ``memory`` ("auto", "cuda", "host"), ``block_count``, ``reuse_delay`` (seconds before a published block
    is reused, default 0.01; a negative or non-finite one is a ValueError here), ``max_frame_bytes`` (the
    largest frame a message may make a pool for, default 256 MiB), ``stats_period``.  A message that cannot
    be published is counted and logged (rate-limited), never raised.
    """

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("memory", "auto", "where the typed messages' blocks live: auto, cuda or host"),
        NodeParameter("block_count", 4, "blocks in the pool (at least 2)"),
        NodeParameter("reuse_delay", DEFAULT_REUSE_DELAY, "seconds before a published block is reused (finite, not negative)"),
        NodeParameter("stats_period", 10.0, "seconds between two lines of counts in the log"),
        NodeParameter("diagnostics", True, "report the pools and readers on /diagnostics once a second"),
        _MAX_FRAME_BYTES,
    )

    def __init__(self, node_name: str, in_type: type, in_topic: str, item: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        declare(self, "diagnostics")  # before the publisher reports (it reads the parameter)
        self.memory, self.block_count, self.reuse_delay, stats_period = self._start_parameters()
        self.max_frame_bytes = _max_frame_bytes(self)
        self.publisher: P | None = None
        self._guard = _MessageGuard(self, item)
        self._item = item
        self._topic_check = check_topic(self, in_topic, in_type)  # a misspelt remapping, or a topic of another type
        self.create_subscription(in_type, in_topic, self._on_message, 10)
        self.create_timer(stats_period, self._log_stats)

    def _start_parameters(self) -> tuple[MemoryKind, int, float, float]:
        """``memory``, ``block_count``, ``reuse_delay`` and ``stats_period``, checked before anything starts: a value
        that cannot work (CUDA asked for where there is none, say) is a :class:`ParameterError` naming it."""
        memory = declare(self, "memory")
        if memory not in ("auto", "cuda", "host"):
            raise ParameterError(f"memory {memory!r} is not one of auto, cuda, host")
        reason = cuda_driver.unavailable_reason(0) if memory == "cuda" else None
        if reason is not None:
            raise ParameterError(f"memory 'cuda' cannot be used: {reason}")
        block_count = declare(self, "block_count")
        if block_count < 2:
            raise ParameterError(f"block_count must be at least 2, not {block_count}")
        try:
            reuse_delay = check_reuse_delay(declare(self, "reuse_delay"))
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        return cast(MemoryKind, memory), block_count, reuse_delay, positive("stats_period", declare(self, "stats_period"))

    def check(self, msg: Any) -> None:
        """Refuse (InvalidDescriptorError) a message whose claims disagree with the bytes it carries, or that
        would need a frame larger than :attr:`max_frame_bytes`: before any pool is made for it."""
        raise NotImplementedError

    def fits(self, publisher: P, msg: Any) -> bool:
        """Whether ``publisher`` can publish ``msg``."""
        raise NotImplementedError

    def make_publisher(self, msg: Any) -> P:
        """A publisher (on this node, with :attr:`memory`, :attr:`block_count`, :attr:`reuse_delay`) sized for ``msg``."""
        raise NotImplementedError

    def upload(self, publisher: P, msg: Any) -> Any | None:
        """Publish ``msg`` through ``publisher``; the typed message sent, or None if no block was free."""
        raise NotImplementedError

    def _log_stats(self) -> None:
        if self.publisher is not None:
            self.get_logger().info(f"dropped {self.dropped} (refused {self.refused}); pool {self.publisher.pool.stats()}")

    def publisher_for(self, msg: Any) -> P:
        """:attr:`publisher` if ``msg`` fits it, else a new one sized by ``msg`` (the old one closed)."""
        if self.publisher is not None and self.fits(self.publisher, msg):
            return self.publisher
        publisher = self.make_publisher(msg)  # first: a message that makes none leaves the old one working
        if self.publisher is not None:
            self.publisher.close()
        self.publisher = publisher
        pool = publisher.pool
        self.get_logger().info(f"publishing {self._item}s from a {pool.memory} pool of {pool.block_count} blocks of "
                               f"{pool.block_size} bytes")
        return publisher

    def _on_message(self, msg: Any) -> None:
        self._topic_check.cancel()
        with self._guard:
            self.check(msg)
            if self.upload(self.publisher_for(msg), msg) is None:
                self._guard.dropped += 1

