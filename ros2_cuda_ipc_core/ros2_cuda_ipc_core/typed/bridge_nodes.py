"""The two bridge nodes every typed package offers, once: typed messages to their ``sensor_msgs`` twin and back.

A typed package subclasses them with its reader and conversion (``DownloadBridge``) or its publisher
factory and upload (``UploadBridge``); the rest (when to download, counting, logging, what a bad message
costs) is the same for images and point clouds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

from ..errors import Ros2CudaIpcError
from ..pool import DEFAULT_REUSE_DELAY, MemoryKind, check_reuse_delay
from .publisher import TypedPublisher
from .reader import TypedReader
from .view import TypedView

P = TypeVar("P", bound=TypedPublisher[Any, Any])
V = TypeVar("V", bound=TypedView[Any])


class DownloadBridge(Node, Generic[V]):
    """Typed messages on ``in_topic`` to plain messages on ``out_topic``, one download each.

    Downloads only while the output has subscribers, at most ``max_rate`` Hz (a parameter; 0 means every
    message); a message that cannot be read is counted and logged, never raised.  Logs its counts every
    ``stats_period`` seconds (a parameter).
    """

    def __init__(self, node_name: str, reader: TypedReader[Any, Any, V], convert: Callable[[V], Any],
                 in_type: type, in_topic: str, out_type: type, out_topic: str, item: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.max_rate = float(self.declare_parameter("max_rate", 0.0).value)
        self.reader = reader
        self.converted = self.skipped = self.dropped = 0
        self._convert = convert
        self._item = item
        self._last = 0.0
        self._out: Any = self.create_publisher(out_type, out_topic, 10)
        self.create_subscription(in_type, in_topic, self._on_message, 10)
        self.create_timer(float(self.declare_parameter("stats_period", 10.0).value), self._log_stats)

    @property
    def listeners(self) -> int:
        """Subscribers of the output: with none, nothing is downloaded."""
        return int(self._out.get_subscription_count())

    def _log_stats(self) -> None:
        self.get_logger().info(f"converted {self.converted}, skipped {self.skipped}, dropped {self.dropped}; "
                               f"reader {self.reader.stats()}")

    def _on_message(self, msg: Any) -> None:
        now = time.monotonic()
        if self.listeners == 0 or (self.max_rate > 0 and now - self._last < 1.0 / self.max_rate):
            self.skipped += 1
            return
        try:
            with self.reader.read(msg) as view:
                out = self._convert(view)
        except Ros2CudaIpcError as exc:
            self.dropped += 1
            self.get_logger().warning(f"{self._item} dropped: {exc}", throttle_duration_sec=5.0)
            return
        self._last = now
        self._out.publish(out)
        self.converted += 1


class UploadBridge(Node, Generic[P]):
    """Plain messages on ``in_topic`` to typed messages, one upload each, through a publisher of this node.

    Subclasses say whether a message fits the current publisher (``fits``), how to make one sized by a
    message (``make_publisher``; the first message and any that does not fit get a new one, the old one is
    closed) and how to upload (``upload``).  Parameters:
    ``memory`` ("auto", "cuda", "host"), ``block_count``, ``reuse_delay`` (seconds before a published block
    is reused, default 0.01; a negative or non-finite one is a ValueError here), ``stats_period``.  A message
    that cannot be published is counted and logged, never raised.
    """

    def __init__(self, node_name: str, in_type: type, in_topic: str, item: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.memory = cast(MemoryKind, str(self.declare_parameter("memory", "auto").value))
        self.block_count = int(self.declare_parameter("block_count", 4).value)
        # Any number (reuse_delay:=0 is an integer to ROS); check_reuse_delay refuses the rest, naming it.
        any_number = ParameterDescriptor(dynamic_typing=True)
        self.reuse_delay = check_reuse_delay(self.declare_parameter("reuse_delay", DEFAULT_REUSE_DELAY, any_number).value)
        self.publisher: P | None = None
        self.dropped = 0
        self._item = item
        self.create_subscription(in_type, in_topic, self._on_message, 10)
        self.create_timer(float(self.declare_parameter("stats_period", 10.0).value), self._log_stats)

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
            self.get_logger().info(f"dropped {self.dropped}; pool {self.publisher.pool.stats()}")

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
        try:
            if self.upload(self.publisher_for(msg), msg) is None:
                self.dropped += 1
        except (Ros2CudaIpcError, ValueError) as exc:
            self.dropped += 1
            self.get_logger().warning(f"{self._item} dropped: {exc}", throttle_duration_sec=5.0)
