"""``DirectChannels``: a pool's direct subscribers, by topic, written to without ever blocking the publisher.

The pool's FD server accepts a channel (a handout connection whose peer asked for a topic) and watches it
for the peer's close; the publishing thread writes records to it.  Every write is non-blocking: a
subscriber that does not read fills its socket's buffer and then loses frames on this path (counted
``direct_drops``; they still reach it over DDS), one that died is dropped at the first failed write
(``direct_closed``).  Only the server thread closes a channel's socket, so the publisher never writes to
a descriptor that was closed and reused under it: a channel the publisher gives up on is shut down, and
the server sees the end.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..stats import Counters

log = logging.getLogger("ros2_cuda_ipc")

#: Counters the channels keep in their pool's ``stats()``.
CHANNEL_COUNTERS = ("direct_subscribed", "direct_sent", "direct_drops", "direct_closed", "direct_refused")
#: Channels one peer process may hold on one pool, and channels a pool keeps in all.
MAX_PER_PEER, MAX_CHANNELS = 32, 256
_SEND_FLAGS = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL


@dataclass(eq=False)
class Channel:
    conn: socket.socket
    pid: int
    topic: str
    template_id: int = field(default=0)  #: the template the subscriber has (0: none yet)


class DirectChannels:
    """The channels of one pool.  ``for_topic`` is what a publish asks first: an empty tuple costs nothing more."""

    def __init__(self, counters: Counters, name: str) -> None:
        self._counters = counters
        self._name = name
        self._lock = threading.Lock()
        self._by_conn: dict[socket.socket, Channel] = {}
        self._by_topic: dict[str, tuple[Channel, ...]] = {}

    # --- the FD server's side ---------------------------------------------------------------------

    def add(self, conn: socket.socket, pid: int, topic: str) -> bool:
        """Take ``conn`` as a channel of ``topic`` for peer ``pid``; False (counted) if over the limits."""
        with self._lock:
            if len(self._by_conn) >= MAX_CHANNELS or \
                    sum(1 for c in self._by_conn.values() if c.pid == pid) >= MAX_PER_PEER:
                self._counters.add("direct_refused")
                return False
            channel = Channel(conn, pid, topic)
            self._by_conn[conn] = channel
            self._by_topic[topic] = (*self._by_topic.get(topic, ()), channel)
        self._counters.add("direct_subscribed")
        log.debug("pool %s: pid %d reads %s directly", self._name, pid, topic)
        return True

    def remove(self, conn: socket.socket) -> None:
        """Forget ``conn`` (its peer closed, or a write to it failed); the caller closes it."""
        with self._lock:
            self._forget(conn)

    def __contains__(self, conn: object) -> bool:
        return conn in self._by_conn

    # --- the publisher's side ---------------------------------------------------------------------

    def for_topic(self, topic: str) -> tuple[Channel, ...]:
        """The channels of ``topic`` now (read without the lock: a tuple replaced whole, never changed)."""
        return self._by_topic.get(topic, ())

    def send(self, channels: tuple[Channel, ...], template_id: int, template: Callable[[], bytes],
             frame: bytes) -> None:
        """Write ``frame`` to each channel, preceded by the template record ``template()`` where the channel does
        not have ``template_id`` yet.  Never blocks; a full channel loses the frame, a broken one is dropped."""
        with self._lock:
            for channel in channels:
                if channel.conn not in self._by_conn:
                    continue  # dropped since the caller looked
                try:
                    if channel.template_id != template_id:
                        if not self._write(channel, template()):
                            continue
                        channel.template_id = template_id
                    if self._write(channel, frame):
                        self._counters.add("direct_sent")
                except OSError as exc:  # EPIPE, ECONNRESET: the subscriber is gone
                    self._drop(channel, f"{exc.strerror or exc}")

    def _write(self, channel: Channel, record: bytes) -> bool:
        try:
            sent = channel.conn.send(record, _SEND_FLAGS)
        except BlockingIOError:
            self._counters.add("direct_drops")
            return False
        if sent != len(record):  # a record cut in two: the stream's framing is lost for good
            self._drop(channel, f"a write of {len(record)} bytes took {sent}")
            return False
        return True

    def _drop(self, channel: Channel, why: str) -> None:
        log.info("pool %s: direct subscriber pid %d of %s dropped: %s", self._name, channel.pid, channel.topic, why)
        self._forget(channel.conn)
        self._counters.add("direct_closed")
        with contextlib.suppress(OSError):
            channel.conn.shutdown(socket.SHUT_RDWR)  # the server thread sees the end and closes it

    def _forget(self, conn: socket.socket) -> None:
        channel = self._by_conn.pop(conn, None)
        if channel is not None:
            left = tuple(c for c in self._by_topic.get(channel.topic, ()) if c is not channel)
            if left:
                self._by_topic[channel.topic] = left
            else:
                self._by_topic.pop(channel.topic, None)

    def count(self) -> int:
        return len(self._by_conn)
