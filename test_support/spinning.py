"""Test support (not shipped): spin an executor until a condition holds, for tests of nodes in one process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def spin_until(executor: Any, done: Callable[[], Any], timeout: float = 10.0) -> bool:
    """Spin ``executor`` until ``done()`` is true or ``timeout`` seconds have passed; return ``done()``."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
    return bool(done())
