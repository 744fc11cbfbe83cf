"""``UpstreamWatch``: a consumer says what is upstream instead of sitting silent.

A typo'd topic used to run with empty logs, a killed camera to freeze the counts without a word.  The
watch logs once "waiting for the first message on X" when nothing came within ``first_wait`` seconds,
once "publisher of X gone" when the messages stopped and no publisher is left, and once "back" when one
returns: at most one line per change, however long it lasts.  Once told the message type it reads, it counts
only publishers of that type (those of another type are said apart: they can never deliver here).
"""

from __future__ import annotations

import time
from typing import Any

from ros2_cuda_ipc_core import message_type_name

__all__ = ["UpstreamWatch"]


class UpstreamWatch:
    """Watches one subscribed topic of ``node``; call :meth:`seen` from the subscription's callback."""

    def __init__(self, node: Any, topic: str, message_type: type | None = None, *, first_wait: float = 5.0,
                 period: float = 1.0) -> None:
        resolve = getattr(node, "resolve_topic_name", None)  # rclpy newer than Humble's first releases
        self.topic = resolve(topic) if resolve is not None else topic
        self.received = 0
        self._node = node
        self._first_wait = first_wait
        self._started = time.monotonic()
        self._said_waiting = self._said_gone = False
        self._type_name: str | None = None
        if message_type is not None:
            self.expect(message_type)
        node.create_timer(period, self.check)

    def expect(self, message_type: type) -> None:
        """Count only publishers of ``message_type`` from now on."""
        self._type_name = message_type_name(message_type)

    def seen(self) -> None:
        self.received += 1

    def check(self) -> None:
        """What the graph says now, logged only when it changed."""
        publishers, others = self._publishers()
        log = self._node.get_logger()
        if not self.received:
            if not self._said_waiting and time.monotonic() - self._started >= self._first_wait:
                self._said_waiting = True
                another = f"; {others} of another type" if others else ""
                log.info(f"waiting for the first message on {self.topic} ({publishers} publishers of it now{another})")
            return
        if publishers == 0 and not self._said_gone:
            self._said_gone = True
            log.warning(f"publisher of {self.topic} gone after {self.received} messages: waiting for another")
        elif publishers and self._said_gone:
            self._said_gone = False
            log.info(f"{self.topic} has a publisher again")

    def _publishers(self) -> tuple[int, int]:
        """Publishers of the topic of the expected type (of any, until told it), and of another type."""
        if self._type_name is None:
            return self._node.count_publishers(self.topic), 0
        types = [info.topic_type for info in self._node.get_publishers_info_by_topic(self.topic)]
        matching = types.count(self._type_name)
        return matching, len(types) - matching
