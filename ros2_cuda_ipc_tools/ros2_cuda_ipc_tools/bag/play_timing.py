"""``PlayClock``: when each bag message is due, and the stretches of bag time that are skipped.

A message is due at its bag time after the first, scaled by the rate.  Bag times come from a file and may
be anything: one stamp of 2**63-1, a stamp of 0 before the rest, one flipped byte in a SQLite3 column.  A
jump forward of more than ``max_gap`` is not waited for: the clock starts again from that message (the
caller says so), so no single stamp can stall a replay.  A message earlier than the one before (a bag
whose files overlap) is due at once.
"""

from __future__ import annotations

import time

__all__ = ["PlayClock"]


class PlayClock:
    """Bag time to wall time at ``rate``, skipping any gap of more than ``max_gap_ns``."""

    def __init__(self, rate: float, max_gap_ns: int) -> None:
        self.rate = rate
        self.max_gap_ns = max_gap_ns
        self.position = 0  #: bag time played so far, in ns, gaps skipped left out
        self._bag_base: int | None = None
        self._wall_base = 0.0
        self._last = 0

    def wait_for(self, timestamp: int) -> int | None:
        """Sleep until the message at bag time ``timestamp`` is due; the gap skipped before it (ns), if any."""
        now = time.monotonic()
        if self._bag_base is None:
            self._bag_base, self._wall_base, self._last = timestamp, now, timestamp
            return None
        gap = timestamp - self._last
        if gap > self.max_gap_ns:
            self._bag_base, self._wall_base, self._last = timestamp, now, timestamp
            return gap
        if gap > 0:
            self.position += gap
            self._last = timestamp
        delay = self._wall_base + (timestamp - self._bag_base) / self.rate / 1e9 - now
        if delay > 0:
            time.sleep(delay)
        return None
