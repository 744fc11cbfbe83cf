"""``Throttle``: say a thing at most once a period, however often it happens (a hostile peer can make it happen
thousands of times a second; the log must not become the attack)."""

from __future__ import annotations

import time


class Throttle:
    """``ready(key)`` is True at most once every ``period`` seconds per key; ``suppressed(key)`` counts the rest."""

    def __init__(self, period: float) -> None:
        self.period = period
        self._next: dict[object, float] = {}
        self._suppressed: dict[object, int] = {}

    def ready(self, key: object = None) -> bool:
        now = time.monotonic()
        if now < self._next.get(key, 0.0):
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._next[key] = now + self.period
        return True

    def suppressed(self, key: object = None) -> int:
        """How many times ``ready(key)`` said no since it last said yes (and forget them)."""
        return self._suppressed.pop(key, 0)
