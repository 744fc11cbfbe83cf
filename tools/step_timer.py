"""Step timers for the developer profiles (``profile_read.py``, ``profile_publish.py``): wrap a function or a
driver call so its time adds to the current frame's, run a frame function at a camera's rate, print the table; and
for the two-process profiles (``profile_gil_wait.py``, ``profile_direct.py``), a publisher's wait for its subscriber.

Not part of the packages; the profiles import it from their own folder.
"""

from __future__ import annotations

import collections
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

from ros2_cuda_ipc_core.measure_cost import WARMUP_FRAMES, percentile

__all__ = ["WARMUP_FRAMES", "at_rate", "frame_ns", "print_table", "spin_until_subscribed", "step_calls", "timed",
           "wrap_attribute"]

#: Nanoseconds each wrapped step took in the current frame (a profile clears it at each frame's start).
frame_ns: collections.Counter[str] = collections.Counter()
#: Calls of each wrapped step over the whole run.
step_calls: collections.Counter[str] = collections.Counter()


def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, its time added to ``frame_ns[label]`` and its calls counted."""
    clock = time.perf_counter_ns

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return function(*args, **kwargs)
        finally:
            frame_ns[label] += clock() - start
            step_calls[label] += 1

    return wrapper


def wrap_attribute(owner: Any, name: str, label: str) -> None:
    """Replace ``owner.name`` (a function, method, classmethod or staticmethod) by its :func:`timed` self."""
    if isinstance(owner, type):  # found on the class or inherited: wrap it on this class
        raw = next(klass.__dict__[name] for klass in owner.__mro__ if name in klass.__dict__)
    else:
        raw = getattr(owner, name)
    if isinstance(raw, classmethod):
        setattr(owner, name, classmethod(timed(label, raw.__func__)))
    elif isinstance(raw, staticmethod):
        setattr(owner, name, staticmethod(timed(label, raw.__func__)))
    else:
        setattr(owner, name, timed(label, raw))


def at_rate(rate: float, count: int, frame: Callable[[Any], dict[str, float] | None],
            prepare: Callable[[int], Any] = lambda index: index) -> list[dict[str, float]]:
    """``frame(prepare(i))`` once per tick, idle in between (``prepare`` runs before the idle gap, as a
    descriptor arrives before its consumer wakes); keep what it returns after the warm-up."""
    period, tick, kept = 1.0 / rate, time.monotonic(), []
    for index in range(WARMUP_FRAMES + count):
        prepared = prepare(index)
        tick = max(tick + period, time.monotonic())
        time.sleep(max(0.0, tick - time.monotonic()))
        result = frame(prepared)
        if index >= WARMUP_FRAMES and result is not None:
            kept.append(result)
    return kept


def print_table(rows: list[dict[str, float]], title: str) -> None:
    """Each step's calls per frame and p50 / p90 of its time per frame (µs), the slowest first."""
    print(f"\n{title}\n{'step':52} {'calls/frame':>11} {'p50 us':>8} {'p90 us':>8}")
    labels = sorted({label for row in rows for label in row}, key=lambda lb: -statistics.median(
        [row.get(lb, 0.0) for row in rows]))
    for label in labels:
        values = [row.get(label, 0.0) for row in rows]
        per_frame = step_calls[label] / max(1, len(rows) + WARMUP_FRAMES) if label in step_calls else 1.0
        print(f"{label:52} {per_frame:11.2f} {percentile(values, 50):8.1f} {percentile(values, 90):8.1f}")


def spin_until_subscribed(executor: Any, publisher: Any, seconds: float = 30.0, settle: float = 1.0) -> None:
    """Spin ``executor`` until ``publisher`` has a subscription (at most ``seconds``), then ``settle`` seconds more, so
    the subscriber's side of discovery is done too before the first frame."""
    deadline = time.monotonic() + seconds
    while publisher.subscription_count < 1 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
