"""What a forked child must let go of: this process's pools and imports, registered once with ``os.register_at_fork``.

A child shares its parent's open file descriptions, so without this a forked child would keep a dead
reader's leases (pinning its blocks), a dead publisher's liveness lock (readers would think it alive)
and its listening socket (readers would wait on it).  Every fd this package opens is also close-on-exec,
so an ``exec`` after the fork lets go of everything by itself; this covers the fork without exec
(``multiprocessing``'s fork start method, say).
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Protocol

log = logging.getLogger("ros2_cuda_ipc")


class _ClosesInChild(Protocol):
    def _close_in_child(self) -> None: ...


_registered: weakref.WeakSet[_ClosesInChild] = weakref.WeakSet()


def close_in_forked_children(obj: _ClosesInChild) -> None:
    """Call ``obj._close_in_child()`` in every child this process forks while ``obj`` lives."""
    _registered.add(obj)


def forget_in_forked_children(obj: _ClosesInChild) -> None:
    """``obj`` has closed: a child forked from now on has nothing of it to let go of."""
    _registered.discard(obj)


def _after_fork_in_child() -> None:
    for obj in list(_registered):
        try:
            obj._close_in_child()
        except Exception:  # a child must get going whatever one object's cleanup does
            log.exception("closing %r in a forked child failed", obj)
    _registered.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
