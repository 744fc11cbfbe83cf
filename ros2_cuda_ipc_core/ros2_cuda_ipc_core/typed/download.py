"""``BackgroundDownload``: work on leased frames (a download, a JPEG encode) off the caller's thread, on a side stream.

The caller takes the lease (a read ordered on :attr:`BackgroundDownload.stream` after the frame's ready
event: never a host-side wait) and hands the view over; one worker thread runs the work and closes the
view, so the lease is held only until the copy is done.  At most one frame is in work: a frame offered
while the worker is busy is refused (the caller counts it dropped), so a slow consumer of downloads
never holds more than one block and never blocks the caller.  A frame's work may need a warm-up first (a
library's import and first call, seconds long): it runs on the worker too, so it never stalls the caller
either, and frames offered during it are counted apart.  The typed publishers' CPU twins and the bag
recorder use it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..stats import Counters

log = logging.getLogger("ros2_cuda_ipc")
V = TypeVar("V")

__all__ = ["BackgroundDownload"]


class BackgroundDownload:
    """One worker thread and, for CUDA, one non-blocking side stream on ``cuda_device`` (None: host frames).

    Counters: ``submitted``, ``busy_drops`` (refused while the worker was busy with a frame), ``warmup_drops``
    (refused while a warm-up ran), ``failed`` (work that raised: logged, never raised), ``done``.
    """

    def __init__(self, name: str, cuda_device: int | None = None) -> None:
        self.name = name
        self.cuda_device = cuda_device
        self.counters = Counters("submitted", "busy_drops", "warmup_drops", "failed", "done")
        self._stream = 0
        self._job: tuple[Any, Callable[[Any], Callable[[], None] | None], Callable[[], object] | None] | None = None
        self._warming = False
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def stream(self) -> int:
        """The raw CUstream to lease frames on (created on first use; 0 for host frames)."""
        if self.cuda_device is not None and not self._stream:
            self._stream = _create_stream(self.cuda_device)
        return self._stream

    @property
    def busy(self) -> bool:
        return self._job is not None

    def submit(self, lease: Callable[[int], V], work: Callable[[V], Callable[[], None] | None], *,
               warm_up: Callable[[], object] | None = None) -> bool:
        """Lease a frame now (``lease(stream)`` returns a closable view) and run ``work(view)`` on the worker.

        False, with nothing leased, if a frame is still in work or this is closed.  The view is closed
        and the worker takes the next frame as soon as the work returns (or raises); what the work returns,
        if anything, runs after that, without the lease (publishing what the work made, say).  ``warm_up``,
        if given, runs on the worker before the work (the frame stays leased meanwhile, so none is lost).
        """
        with self._wake:
            if self._closed or self._job is not None:
                self.counters.add("warmup_drops" if self._warming else "busy_drops")
                return False
            self._job = (lease(self.stream), work, warm_up)
            self._warming = warm_up is not None
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"download {self.name}", daemon=True)
                self._thread.start()
            self._wake.notify()
        self.counters.add("submitted")
        return True

    def _run(self) -> None:
        if self.cuda_device is not None:  # our own thread: its driver calls need a current context
            from ..memory.cuda_context import make_current

            make_current(self.cuda_device)
        while True:
            with self._wake:
                while self._job is None and not self._closed:
                    self._wake.wait()
                if self._job is None:
                    return
                view, work, warm_up = self._job
            then = None
            try:
                if warm_up is not None:
                    self._warm_up(warm_up)
                if not self._closed:  # closed during a warm-up: the node is going, publish nothing more
                    then = work(view)
            except Exception as exc:  # a frame that cannot be converted is this frame's loss, not the node's
                self._failed(exc)
            finally:
                view.close()
                with self._wake:
                    self._job = None
                    self._warming = False
            try:
                if then is not None:
                    then()
                self.counters.add("done")
            except Exception as exc:
                self._failed(exc)

    def _warm_up(self, warm_up: Callable[[], object]) -> None:
        """A warm-up that fails is logged and the frame's work runs all the same (its encode then starts cold)."""
        try:
            warm_up()
        except Exception as exc:
            log.warning("%s: a warm-up failed, the work goes on without it: %s: %s", self.name, type(exc).__name__, exc)
        finally:
            with self._wake:
                self._warming = False

    def _failed(self, exc: Exception) -> None:
        self.counters.add("failed")
        log.warning("%s: a frame's background work failed: %s: %s", self.name, type(exc).__name__, exc)

    def stats(self) -> dict[str, int]:
        return self.counters.snapshot()

    def close(self) -> None:
        """Finish the frame in work, stop the worker and destroy the side stream."""
        with self._wake:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self._stream:
            _destroy_stream(self.cuda_device or 0, self._stream)
            self._stream = 0

    def __enter__(self) -> BackgroundDownload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _create_stream(device: int) -> int:
    from ..memory.cuda_context import driver, on_device
    from ..memory.cuda_driver import driver_call

    cu = driver()
    with on_device(device):
        return int(driver_call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING))


def _destroy_stream(device: int, stream: int) -> None:
    from ..memory.cuda_context import driver, on_device
    from ..memory.cuda_driver import driver_call

    cu = driver()
    with on_device(device):
        driver_call(cu.cuStreamDestroy, cu.CUstream(stream))
