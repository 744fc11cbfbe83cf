"""``UpstreamWatch``: a consumer says what is upstream instead of sitting silent.

A typo'd topic used to run with empty logs, a killed camera to freeze the counts without a word.  The
watch logs once "waiting for the first message on X" when nothing came within ``first_wait`` seconds,
once "publisher of X gone" when the messages stopped and no publisher is left, and once "back" when one
returns: at most one line per change, however long it lasts.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["UpstreamWatch"]


class UpstreamWatch:
    """Watches one subscribed topic of ``node``; call :meth:`seen` from the subscription's callback."""

    def __init__(self, node: Any, topic: str, *, first_wait: float = 5.0, period: float = 1.0) -> None:
        resolve = getattr(node, "resolve_topic_name", None)  # rclpy newer than Humble's first releases
        self.topic = resolve(topic) if resolve is not None else topic
        self.received = 0
        self._node = node
        self._first_wait = first_wait
        self._started = time.monotonic()
        self._said_waiting = self._said_gone = False
        node.create_timer(period, self.check)

    def seen(self) -> None:
        self.received += 1

    def check(self) -> None:
        """What the graph says now, logged only when it changed."""
        publishers = self._node.count_publishers(self.topic)
        log = self._node.get_logger()
        if not self.received:
            if not self._said_waiting and time.monotonic() - self._started >= self._first_wait:
                self._said_waiting = True
                log.info(f"waiting for the first message on {self.topic} ({publishers} publishers of it now)")
            return
        if publishers == 0 and not self._said_gone:
            self._said_gone = True
            log.warning(f"publisher of {self.topic} gone after {self.received} messages: waiting for another")
        elif publishers and self._said_gone:
            self._said_gone = False
            log.info(f"{self.topic} has a publisher again")
