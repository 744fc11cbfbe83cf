"""While a direct subscription lives, a thread that wants the GIL waits at most :data:`DIRECT_SWITCH_INTERVAL` for it.

A direct callback's wait for the GPU (a stream's synchronize) lets go of the GIL.  The frame's DDS copy reaches
the executor's thread meanwhile, and rclpy's Python executor holds the GIL for its whole turn on it (the wait set
rebuilt, the take, the duplicate dropped): hundreds of microseconds.  Python lets a holder run
``sys.getswitchinterval()`` (5 ms by default) before it must let go, so the callback, its wait over, waited out
that turn: on the H200 a direct subscriber's ``wait`` was ~780 us on the Python executor against ~240 on the C++
events executor.  ``tools/profile_gil_wait.py`` shows the same on a CPU.  So the first direct receiver lowers the
interval to 50 us (only if it is longer) and the last one to close puts it back (only if nothing changed it since).
"""

from __future__ import annotations

import math
import sys
import threading

#: The longest a thread waits for the GIL before the holder must let go, while a direct receiver lives (seconds).
DIRECT_SWITCH_INTERVAL = 50e-6


class _SwitchInterval:
    """A count of the receivers that want the shorter interval, and what it was before the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._before: float | None = None  # the interval the first holder found, if it lowered it

    def hold(self) -> None:
        with self._lock:
            if self._holders == 0:
                current = sys.getswitchinterval()
                if current > DIRECT_SWITCH_INTERVAL:
                    sys.setswitchinterval(DIRECT_SWITCH_INTERVAL)
                    self._before = current
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders > 0 or self._before is None:
                return
            if math.isclose(sys.getswitchinterval(), DIRECT_SWITCH_INTERVAL, rel_tol=0.01):  # still ours
                sys.setswitchinterval(self._before)
            self._before = None


switch_interval = _SwitchInterval()
