"""The lease releaser: one worker thread drops CUDA leases once the consumer's work on them has finished.

A release records a completion event on the consumer's stream and hands it to the worker, which
waits for it without the GIL (``cuda.bindings`` releases it around driver calls) and then gives
the lease back.  The caller never blocks on the GPU.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from .cuda_context import context_for, driver, make_current, on_device
from .cuda_driver import driver_call
from .cuda_vmm import stream_idle

log = logging.getLogger("ros2_cuda_ipc")


class Releaser:
    """One worker thread that drops leases once their completion events fire; events are reused per device.

    No lock: a release can run from the garbage collector (a view collected) while this very thread is
    inside the releaser, and re-entering a held lock would deadlock it.  The free events are lists in a
    dict, whose ``setdefault``, ``append`` and ``pop`` are atomic.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[int, Any, Callable[[], None]]] = queue.SimpleQueue()
        self._free: dict[int, list[Any]] = {}
        self._thread = threading.Thread(target=self._run, name="ros2_cuda_ipc lease releaser", daemon=True)
        self._thread.start()

    def _event(self, device: int) -> Any:
        try:
            return self._free[device].pop()
        except (KeyError, IndexError):  # none made for this device yet, or every one is in use
            pass
        cu = driver()
        with on_device(device):
            return driver_call(cu.cuEventCreate, cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)

    def release_after(self, device: int, stream: int, release: Callable[[], None]) -> None:
        """Call ``release`` once the work queued on ``stream`` (of ``device``) so far has finished: at once,
        without the worker, when the stream is idle already (a consumer that synchronized, say)."""
        cu = driver()
        with context_for(stream, device):
            idle = stream_idle(stream)
            if not idle:
                event = self._event(device)
                driver_call(cu.cuEventRecord, event, stream)
        if idle:
            release()
        else:
            self._jobs.put((device, event, release))

    def _run(self) -> None:
        cu = driver()
        while True:
            device, event, release = self._jobs.get()
            try:
                make_current(device)
                cu.cuEventSynchronize(event)
            except Exception:  # the lease goes back all the same: a pinned block would stall the publisher
                log.exception("waiting for a consumer's completion event failed; releasing its lease now")
            try:
                release()
            except Exception:  # this thread serves every lease of the process: it must outlive one bad release
                log.exception("a lease release failed")
            self._free.setdefault(device, []).append(event)


@functools.cache
def releaser() -> Releaser:
    """The process's releaser, started on first use."""
    return Releaser()
