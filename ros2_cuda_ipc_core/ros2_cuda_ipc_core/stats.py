"""Named counters that pools and readers expose as a plain dict."""

from __future__ import annotations

import threading


class Counters:
    """A fixed set of integer counters, safe to bump from the FD server and release threads."""

    def __init__(self, *names: str) -> None:
        self._values = dict.fromkeys(names, 0)
        self._lock = threading.Lock()

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._values[name] += amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)
