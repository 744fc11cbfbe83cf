"""Test support (not shipped): a parser's cost measured against its input's size, for property tests.

Issue 35's rule: a parser of outside input (a DDS message, a file, an argument) costs at most a constant times the
input's size, plus a constant.  :func:`measure` runs a parse and notes its CPU time (``time.thread_time``: the
calling thread's own, with the collector held off meanwhile), then again under ``tracemalloc`` for its peak of
allocated bytes; :meth:`Cost.assert_within` checks both against ``per_byte * size + fixed``.  The bounds are loose on
purpose, hundreds of times what a parse takes here: they catch a cost that grows with a field's value (a count,
a length the message only states), which a fixed-size message makes thousands of times the bound.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Allocated bytes an input byte may cost, and what any parse may allocate besides.
PEAK_PER_BYTE = 64
PEAK_FIXED = 256 * 1024
#: CPU seconds an input byte may cost, and what any parse may take besides (a first call's imports and caches).
CPU_PER_BYTE = 20e-6
CPU_FIXED = 0.05


@dataclass(frozen=True)
class Cost:
    """What one parse took: ``peak_bytes`` (tracemalloc's peak above the start) and ``cpu_s``."""

    peak_bytes: int
    cpu_s: float

    def assert_within(self, size: int, what: str = "the parse", *, peak_per_byte: float = PEAK_PER_BYTE,
                      peak_fixed: int = PEAK_FIXED, cpu_per_byte: float = CPU_PER_BYTE,
                      cpu_fixed: float = CPU_FIXED) -> None:
        peak_bound = peak_per_byte * size + peak_fixed
        cpu_bound = cpu_per_byte * size + cpu_fixed
        assert self.peak_bytes <= peak_bound, \
            f"{what} of {size} bytes allocated {self.peak_bytes} bytes at its peak (bound {peak_bound:.0f})"
        assert self.cpu_s <= cpu_bound, f"{what} of {size} bytes took {self.cpu_s:.3f} s of CPU (bound {cpu_bound:.3f})"


def measure(parse: Callable[[], Any], expected: tuple[type[BaseException], ...] = ()) -> tuple[Any, Cost]:
    """Run ``parse()`` twice, as it must be repeatable (a fresh parser each call): once for its CPU time, once under
    tracemalloc (which slows it several times) for its peak; what the first returned (or the ``expected`` exception it
    raised) and what it cost."""
    # The thread's CPU, not the process's: a node's DDS threads (discovery, a test's other nodes) ran in the process
    # time, and once made a 13-byte parse "take" 0.2 s.  No collection either: a full one walks the whole test
    # process's heap, which is not the parse's cost.
    collecting = gc.isenabled()
    gc.disable()
    try:
        start_cpu = time.thread_time()
        result = _outcome(parse, expected)
        cpu_s = time.thread_time() - start_cpu
    finally:
        if collecting:
            gc.enable()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start_bytes = tracemalloc.get_traced_memory()[0]
        _outcome(parse, expected)
        peak = tracemalloc.get_traced_memory()[1] - start_bytes
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, Cost(max(0, peak), cpu_s)


def _outcome(parse: Callable[[], Any], expected: tuple[type[BaseException], ...]) -> Any:
    try:
        return parse()
    except expected as exc:
        return exc
