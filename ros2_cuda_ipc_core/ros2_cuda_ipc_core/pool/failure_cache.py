"""``FailureCache``: the pool sockets a reader failed to import from lately, so it does not try them per message.

A forged descriptor naming a socket that never answers would otherwise cost every reader the
connect timeout on every message.  Only what was tried is remembered: the socket (whose name
carries its pool id and publisher pid, checked before any connection), never a descriptor's
unverified claims, so a forged message cannot shut a live pool out.  A failure is kept
``retry_after`` seconds, at most ``MAX_ENTRIES`` of them, oldest dropped first.

A failure that made the reader *wait* (``WAITED`` seconds or more between :meth:`check` and
:meth:`remember` on that thread: a socket that is bound and never answers) backs off: each such
failure of a socket right after its last one expired doubles its time, up to ``LONGEST`` seconds.
And such sockets are tried again one at a time, spread out: after a wait of *w* seconds none is
tried again for ``QUIET * w`` seconds, so retrying silent sockets takes at most 1/``QUIET`` of the
reading thread's time, however many there are.  So a silent socket costs one wait, then a few
spread over its first minute, then one a minute or rarer, never one every ``retry_after``; a new
socket is always tried at once (it may be a genuine pool): one wait per forged instance.  A socket
that fails quickly (nothing listens, refused) never backs off: trying it again costs nothing, and a
pool that refused a peer for a moment is tried again soon.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import NamedTuple

from ..errors import CudaUnavailableError, InvalidDescriptorError, PoolUnavailableError, Ros2CudaIpcError
from ..throttle import Throttle

log = logging.getLogger("ros2_cuda_ipc")
_ONCE = Throttle(float("inf"))  # the backoff is said once a process; FailureCache.stats() counts the waits

MAX_ENTRIES = 1024
#: A failure this many seconds after its check made the reader wait: it backs off.
WAITED = 0.1
#: The longest a socket that made readers wait is left alone, in seconds.
LONGEST = 60.0
#: After a wait of w seconds, no socket that made readers wait is tried again for QUIET * w seconds.
QUIET = 20.0
#: What a remembered failure is raised as again: its own kind, so callers tell place from a bad descriptor.
_KINDS: tuple[type[Ros2CudaIpcError], ...] = (InvalidDescriptorError, CudaUnavailableError, PoolUnavailableError)


class _Failure(NamedTuple):
    until: float  #: not tried again before this (time.monotonic())
    period: float  #: how long it was left alone this time
    waited: bool  #: whether the try made the reader wait
    error: Ros2CudaIpcError


class FailureCache:
    """Recent import failures by socket path, each until its time is up."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self._entries: OrderedDict[str, _Failure] = OrderedDict()  # expired ones too, for the backoff
        self._lock = threading.Lock()
        self._tries = threading.local()  # (socket path, when) of this thread's last check that let a try go
        self._waits = 0
        self._quiet_until = 0.0  # no socket that made readers wait is tried again before this

    def check(self, socket_path: str, pool_name: str) -> None:
        """Raise the remembered error's kind, at once, if ``socket_path`` failed lately; else note the try's start."""
        now = time.monotonic()
        entry = self._entries.get(socket_path) if self._entries else None
        if entry is None or (now >= entry.until and not (entry.waited and now < self._quiet_until)):
            self._tries.last = (socket_path, now)
            return
        kind = next((k for k in _KINDS if isinstance(entry.error, k)), PoolUnavailableError)
        until = max(entry.until, self._quiet_until if entry.waited else 0.0)
        raise kind(f"{pool_name} failed {now - (entry.until - entry.period):.1f} s ago; not tried again for "
                   f"{until - now:.1f} s: {entry.error}")

    def remember(self, socket_path: str, error: Ros2CudaIpcError) -> None:
        now = time.monotonic()
        tried_path, tried_at = getattr(self._tries, "last", ("", now))
        waited = tried_path == socket_path and now - tried_at >= WAITED
        with self._lock:
            period = self.retry_after
            if waited:
                self._waits += 1
                self._quiet_until = now + QUIET * (now - tried_at)
                last = self._entries.get(socket_path)
                if last is not None and last.waited and now - last.until < LONGEST:
                    period = min(LONGEST, last.period * 2)  # it made us wait again as soon as it was let try
            self._entries[socket_path] = _Failure(now + period, period, waited, error)
        if waited and _ONCE.ready("waited"):
            log.warning("%s made a reader wait %.1f s (%s); a socket that does so is tried again only after %g s "
                        "doubling to %g s, and one at a time (said once)", socket_path, now - tried_at, error,
                        self.retry_after, LONGEST)
            self._entries.move_to_end(socket_path)
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)

    def stats(self) -> dict[str, int]:
        """``import_waits``: failures that made a reader wait; ``sockets_backed_off``: sockets left alone longer
        than ``retry_after`` now."""
        now = time.monotonic()
        with self._lock:
            backed_off = sum(1 for e in self._entries.values() if e.until > now and e.period > self.retry_after)
            return {"import_waits": self._waits, "sockets_backed_off": backed_off}
