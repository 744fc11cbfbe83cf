"""``FdBudget``: how many of a bag's image and cloud topics can be replayed through pools of their own.

A pool costs its process file descriptors (its memfds, its socket, one a connected reader) and a thread (its
FD server): 9 descriptors and a thread here.  A bag of 300 small Image topics under ``ulimit -n 1024`` made
bag_play fail with ``OSError: [Errno 24]`` from the 114th pool.  The budget counts the descriptors open now
against the soft ``RLIMIT_NOFILE``, keeps a reserve for DDS, the bag's files and readers' connections, and says
whether one more pool fits; the player publishes the topics past it as plain messages instead, so descriptors
and threads scale with the limit, not with the bag.
"""

from __future__ import annotations

import os
import resource

__all__ = ["FdBudget"]

#: Descriptors kept free for DDS, the bag's files, the staging and what rclpy opens later.
RESERVE = 128
#: Descriptors a pool is counted at before one was measured, and per pool for its readers' connections.
FIRST_ESTIMATE = 12
PER_POOL_READERS = 4


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # no /proc: count nothing open, the reserve still holds
        return 0


class FdBudget:
    """Room for pools under this process's open-file limit (soft ``RLIMIT_NOFILE``)."""

    def __init__(self, reserve: int = RESERVE) -> None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.limit = soft if soft != resource.RLIM_INFINITY else 1 << 20
        self.reserve = reserve
        self.per_pool = FIRST_ESTIMATE
        self.promised = 0  #: pools granted but not made yet (made at their first message)
        self._measured = False

    def grant(self) -> bool:
        """Whether one more pool fits (it is counted from now on, made or not)."""
        free = self.limit - _open_descriptors() - self.reserve - self.promised * self.per_pool
        if free < self.per_pool + PER_POOL_READERS:
            return False
        self.promised += 1
        return True

    def opened(self) -> int:
        """Descriptors open now: the mark before a pool is made (see :meth:`made`)."""
        return _open_descriptors()

    def made(self, before: int | None) -> None:
        """A granted pool was made; ``before``: :meth:`opened` just before it (the first one measures the cost)."""
        self.promised = max(self.promised - 1, 0)
        if before is not None and not self._measured:
            cost = _open_descriptors() - before
            if cost > 0:
                self.per_pool, self._measured = cost, True
