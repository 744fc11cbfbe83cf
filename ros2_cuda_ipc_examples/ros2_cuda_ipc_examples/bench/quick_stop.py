"""A benchmark that runs pipelines one after another stops within a second of SIGINT or SIGTERM: the pipeline it
runs is cut (its nodes killed) and no other starts.

The runner's own Ctrl-C path asks each node for a last report and then stops the nodes one at a time, as it must
for a run whose figures count (docs/decisions.md: Fast DDS's deadlock when participants leave together): seconds for
sixteen nodes on a busy machine.  A benchmark cut short keeps what its nodes reported so far, marked partial, and
needs neither.  So a stop is noted, never raised, while the runner watches its nodes; the runner's watcher
(:meth:`QuickStop.watcher`) then SIGKILLs them, the runner reports them gone (``PipelineFailed``, its summary
holding their reports), and the benchmark, seeing :meth:`QuickStop.stopped`, writes that summary as cut.  Before
the runner has started a node there is nothing to cut: the first stop is raised as ``KeyboardInterrupt``.  A stop the
runner took itself (its handler while it stops a finished run's nodes) is seen through the signal wakeup fd.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

from ros2_cuda_ipc_core import stop_reason

__all__ = ["QuickStop"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class QuickStop:
    """The first SIGINT or SIGTERM within :meth:`armed`; :meth:`watcher` is the runner's ``watcher=``."""

    def __init__(self) -> None:
        self.by: str | None = None  # "Ctrl-C" or "SIGTERM" once stopped
        self._pids: dict[str, int] = {}  # the nodes of the pipeline being run, as the runner last gave them
        self._wakeup: socket.socket | None = None

    def new_pipeline(self) -> None:
        """Call before each pipeline is run: until the runner has started its nodes, a stop is raised."""
        self._pids = {}

    def stopped(self) -> bool:
        """Whether a stop came, the ones another handler took meanwhile included."""
        if self._wakeup is not None:
            try:
                numbers = self._wakeup.recv(64)
            except BlockingIOError:
                numbers = b""
            stops = [number for number in numbers if number in _STOP_SIGNALS]
            if stops and self.by is None:
                self._note(stops[0])
        return self.by is not None

    def watcher(self, table: Any, pids: dict[str, int]) -> None:
        """The runner's watcher: after a stop, SIGKILL every node it runs (the runner then ends the run at once)."""
        self._pids = dict(pids)
        if self.stopped():
            for pid in pids.values():
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    @contextmanager
    def armed(self) -> Iterator[None]:
        """SIGINT and SIGTERM noted within the block (main thread only); the handlers before are put back after."""
        def note(signum: int, frame: FrameType | None) -> None:
            first = self.by is None
            self._note(signum)
            if first and not self._pids:  # no node to cut: the runner (or the benchmark) ends at once
                raise KeyboardInterrupt(signal.Signals(signum).name)

        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        previous = {number: signal.signal(number, note) for number in _STOP_SIGNALS}
        self._wakeup = reader
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
            signal.set_wakeup_fd(previous_fd)
            self.stopped()  # a stop the runner took in its last moments is noted too
            self._wakeup = None
            reader.close()
            writer.close()

    def _note(self, signum: int) -> None:
        if self.by is None:
            self.by = stop_reason(KeyboardInterrupt(signal.Signals(signum).name))
