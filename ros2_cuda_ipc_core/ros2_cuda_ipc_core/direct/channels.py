"""``DirectChannels``: a pool's direct subscribers, by topic, written to without ever blocking the publisher.

The pool's FD server accepts a channel (a handout connection whose peer asked for a topic) and watches it
for the peer's close; the publishing thread writes records to it.  Every write is non-blocking.  A channel
whose socket buffer is full is *stalled*: it is taken out of the topic's writers at once, and while it stays
stalled each publication costs it one counted drop for the whole topic (``direct_drops``, O(1) however many
are stalled), never a system call; the FD server watches it and puts it back once its peer has read.  Frames a
stalled channel lost still reach it over DDS.  A channel that broke is dropped at the first failed write
(``direct_closed``).

Limits, so that no peer can take the path from the others: a peer process keeps at most ``MAX_STALLED_PER_PEER``
stalled channels (one more stalls: its oldest stalled one is closed) and ``MAX_PER_PEER`` in all; a pool keeps
``MAX_CHANNELS``, and when they are all taken a new subscriber takes the place of the channel stalled longest
(``direct_evicted``); only when none is stalled is it refused (``direct_refused``).  Each is said once, at
WARNING.

Only the server thread closes a channel's socket, so the publisher never writes to a descriptor that was
closed and reused under it: a channel given up on is shut down, and the server sees the end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..stats import Counters
from ..throttle import Throttle

log = logging.getLogger("ros2_cuda_ipc")

#: Counters the channels keep in their pool's ``stats()``.
CHANNEL_COUNTERS = ("direct_subscribed", "direct_sent", "direct_drops", "direct_closed", "direct_refused",
                    "direct_evicted", "direct_stalls", "direct_skipped")
#: Channels one peer process may hold on one pool (stalled ones, all), and channels a pool keeps in all.
MAX_STALLED_PER_PEER, MAX_PER_PEER, MAX_CHANNELS = 4, 128, 256
_SEND_FLAGS = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL


@dataclass(eq=False)
class Channel:
    conn: socket.socket
    pid: int
    topic: str
    template_id: int = field(default=0)  #: the template the subscriber has (0: none yet)
    stalled_since: float = field(default=0.0)  #: when its buffer filled (0: it takes writes)


class DirectChannels:
    """The channels of one pool.  ``has`` is what a publish asks first: False costs nothing more.

    ``watch_writable(conn)`` (set by the FD server) is called once per stall, on the publishing thread, so that
    the server tells :meth:`resume` when the peer has read.
    """

    def __init__(self, counters: Counters, name: str) -> None:
        self._counters = counters
        self._name = name
        self._lock = threading.Lock()
        self._by_conn: dict[socket.socket, Channel] = {}
        self._writers: dict[str, tuple[Channel, ...]] = {}  # by topic: the channels that take writes now
        self._stalled: dict[str, int] = {}  # by topic: how many are stalled
        self._once = Throttle(float("inf"))  # each kind of refusal is said once; the counters keep the rest
        self.watch_writable: Callable[[socket.socket], None] = lambda conn: None

    # --- the FD server's side ---------------------------------------------------------------------

    def add(self, conn: socket.socket, pid: int, topic: str) -> str | None:
        """Take ``conn`` as a channel of ``topic`` for peer ``pid``; None, or why not (counted, said once)."""
        with self._lock:
            mine = sum(1 for c in self._by_conn.values() if c.pid == pid)
            if mine >= MAX_PER_PEER:
                why = f"pid {pid} holds {MAX_PER_PEER} direct channels of this pool already"
            elif len(self._by_conn) >= MAX_CHANNELS and not self._evict_one(f"pid {pid} subscribed"):
                why = f"all {MAX_CHANNELS} direct channels of this pool are taken by subscribers that read"
            else:
                why = None
                channel = Channel(conn, pid, topic)
                self._by_conn[conn] = channel
                self._writers[topic] = (*self._writers.get(topic, ()), channel)
        if why is not None:
            self._counters.add("direct_refused")
            self._say("direct_refused", f"refused a direct channel of {topic}: {why}; its frames go over DDS")
            return why
        self._counters.add("direct_subscribed")
        log.debug("pool %s: pid %d reads %s directly", self._name, pid, topic)
        return None

    def remove(self, conn: socket.socket) -> None:
        """Forget ``conn`` (its peer closed, or a write to it failed); the caller closes it."""
        with self._lock:
            self._forget(conn)

    def resume(self, conn: socket.socket) -> None:
        """``conn``'s peer has read: it takes writes again (the FD server's thread)."""
        with self._lock:
            channel = self._by_conn.get(conn)
            if channel is not None and channel.stalled_since:
                channel.stalled_since = 0.0
                self._unstall(channel.topic)
                self._writers[channel.topic] = (*self._writers.get(channel.topic, ()), channel)

    def __contains__(self, conn: object) -> bool:
        return conn in self._by_conn

    # --- the publisher's side ---------------------------------------------------------------------

    def has(self, topic: str) -> bool:
        """Whether ``topic`` has a channel that takes writes now (read without the lock).  When it has none, a
        publication costs :meth:`stalled_drops` alone, never a record built."""
        return topic in self._writers

    def stalled_drops(self, topic: str) -> None:
        """Count the publication each stalled channel of ``topic`` loses: one counter update, however many."""
        stalled = self._stalled.get(topic, 0)
        if stalled:
            self._counters.add("direct_drops", stalled)

    def skipped(self) -> None:
        """Count a publication that went by DDS alone (its message does not fit a record)."""
        self._counters.add("direct_skipped")

    def send(self, topic: str, template_id: int, template: bytes, frame: bytes) -> None:
        """Write ``frame`` to each channel of ``topic``, preceded by the template record ``template`` where the
        channel does not have ``template_id`` yet.  Never blocks; a full channel stalls, a broken one is dropped.

        After a frame went out, the publishing thread yields its CPU once (``sched_yield``): the kernel tends to
        wake a reader on the writer's CPU, and the publish's DDS write that follows would keep it waiting there
        (about 300 µs on a 2-core machine, docs/decisions.md).  With an idle CPU elsewhere the yield returns at once."""
        sent = 0
        with self._lock:
            self.stalled_drops(topic)
            for channel in self._writers.get(topic, ()):
                try:
                    if channel.template_id != template_id:
                        if not self._write(channel, template):
                            continue
                        channel.template_id = template_id
                    if self._write(channel, frame):
                        sent += 1
                except OSError as exc:  # EPIPE, ECONNRESET: the subscriber is gone
                    self._drop(channel, f"{exc.strerror or exc}", "direct_closed")
        if sent:
            self._counters.add("direct_sent", sent)
            os.sched_yield()

    def _write(self, channel: Channel, record: bytes) -> bool:
        try:
            sent = channel.conn.send(record, _SEND_FLAGS)
        except BlockingIOError:
            self._counters.add("direct_drops")
            self._stall(channel)
            return False
        if sent != len(record):  # a record cut in two: the stream's framing is lost for good
            self._drop(channel, f"a write of {len(record)} bytes took {sent}", "direct_closed")
            return False
        return True

    def _stall(self, channel: Channel) -> None:
        """Take ``channel`` out of its topic's writers until its peer reads; a peer's stalled ones beyond
        ``MAX_STALLED_PER_PEER``: its oldest is closed."""
        self._counters.add("direct_stalls")
        channel.stalled_since = time.monotonic()
        self._remove_writer(channel)
        self._stalled[channel.topic] = self._stalled.get(channel.topic, 0) + 1
        peers = [c for c in self._by_conn.values() if c.pid == channel.pid and c.stalled_since]
        if len(peers) > MAX_STALLED_PER_PEER:
            oldest = min(peers, key=lambda c: c.stalled_since)
            self._drop(oldest, f"pid {oldest.pid} holds more than {MAX_STALLED_PER_PEER} channels that do not read",
                       "direct_evicted")
        if channel.conn in self._by_conn:
            self.watch_writable(channel.conn)

    def _evict_one(self, why: str) -> bool:
        """Close the channel stalled longest, to make room; False if none is stalled."""
        stalled = [c for c in self._by_conn.values() if c.stalled_since]
        if not stalled:
            return False
        oldest = min(stalled, key=lambda c: c.stalled_since)
        self._drop(oldest, f"it has not read since {time.monotonic() - oldest.stalled_since:.1f} s and {why}",
                   "direct_evicted")
        return True

    def _drop(self, channel: Channel, why: str, counter: str) -> None:
        self._say(counter, f"direct subscriber pid {channel.pid} of {channel.topic} dropped: {why}; its frames go "
                           "over DDS")
        self._forget(channel.conn)
        self._counters.add(counter)
        with contextlib.suppress(OSError):
            channel.conn.shutdown(socket.SHUT_RDWR)  # the server thread sees the end and closes it

    def _forget(self, conn: socket.socket) -> None:
        channel = self._by_conn.pop(conn, None)
        if channel is None:
            return
        if channel.stalled_since:
            self._unstall(channel.topic)
        else:
            self._remove_writer(channel)

    def _unstall(self, topic: str) -> None:
        left = self._stalled[topic] - 1
        if left:
            self._stalled[topic] = left
        else:
            del self._stalled[topic]

    def _remove_writer(self, channel: Channel) -> None:
        """Replace the topic's writers by a tuple without ``channel`` (a tuple is never changed: readers need no lock)."""
        left = tuple(c for c in self._writers.get(channel.topic, ()) if c is not channel)
        if left:
            self._writers[channel.topic] = left
        else:
            self._writers.pop(channel.topic, None)

    def _say(self, key: str, what: str) -> None:
        if self._once.ready(key):
            log.warning("pool %s: %s (said once; counted in stats()['%s'])", self._name, what, key)

    def count(self) -> int:
        return len(self._by_conn)
