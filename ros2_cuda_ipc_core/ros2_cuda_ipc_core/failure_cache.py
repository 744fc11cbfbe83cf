"""``FailureCache``: the pool sockets a reader failed to import from lately, so it does not try them per message.

A forged descriptor naming a socket that never answers would otherwise cost every reader the
connect timeout on every message.  Only what was tried is remembered: the socket (whose name
carries its pool id and publisher pid, checked before any connection), never a descriptor's
unverified claims, so a forged message cannot shut a live pool out.  Failures are kept
``retry_after`` seconds, at most ``MAX_ENTRIES`` of them, oldest dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from .errors import CudaUnavailableError, InvalidDescriptorError, PoolUnavailableError, Ros2CudaIpcError

MAX_ENTRIES = 1024
#: What a remembered failure is raised as again: its own kind, so callers tell place from a bad descriptor.
_KINDS: tuple[type[Ros2CudaIpcError], ...] = (InvalidDescriptorError, CudaUnavailableError, PoolUnavailableError)


class FailureCache:
    """Recent import failures by socket path, each until its time is up."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self._entries: OrderedDict[str, tuple[float, Ros2CudaIpcError]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, socket_path: str, pool_name: str) -> None:
        """Raise the remembered error's kind, at once, if ``socket_path`` failed lately."""
        if not self._entries:
            return
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(socket_path)
            if entry is None:
                return
            until, error = entry
            if now >= until:
                del self._entries[socket_path]
                return
        kind = next((k for k in _KINDS if isinstance(error, k)), PoolUnavailableError)
        raise kind(f"{pool_name} failed {self.retry_after - (until - now):.1f} s ago; not tried again for "
                   f"{until - now:.1f} s: {error}")

    def remember(self, socket_path: str, error: Ros2CudaIpcError) -> None:
        with self._lock:
            self._entries[socket_path] = (time.monotonic() + self.retry_after, error)
            self._entries.move_to_end(socket_path)
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)
