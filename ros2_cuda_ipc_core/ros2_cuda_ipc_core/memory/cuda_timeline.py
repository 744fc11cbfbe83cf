"""Readiness through timeline values: a 64-bit value per block in the pool's metadata memfd (DESIGN §15).

The producer's stream writes the block's publication uid into its slot once the work queued before it is
done (``cuStreamWriteValue64``); a reader checks the slot on the host first (reached: no GPU wait at all) and
otherwise makes its own stream wait for it (``cuStreamWaitValue64``, GEQ), never the host.  Unlike an
interprocess event handle this needs nothing but the memfd both sides already map, so no shared ``/dev/shm``
(containers), and the wait is the cheapest the GPU has.  Each side maps the slots on its own, registered with
CUDA for every context (the reader read-only: the memfd is sealed against its writes).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import CudaDriverError
from .cuda_context import driver, on_device
from .cuda_driver import driver_call, unavailable_reason
from .layout import MEMORY_CUDA, SYNC_TIMELINE, PoolHeader
from .memfd import create_sealed, map_fd


@functools.cache  # a driver's capability: asked once per device and process
def timeline_unsupported(device: int) -> str | None:
    """Why ``device`` cannot order streams by timeline values (what the driver says); None when it can.

    Asked of the driver by doing it once: attributes such as ``CAN_USE_64_BIT_STREAM_MEM_OPS`` are deprecated and
    say 0 on devices that support the operations.  A page registered as a publisher and as a reader (read-only)
    registers it, and a value written by a stream arrives."""
    unusable = unavailable_reason(device)
    if unusable is not None:
        return unusable
    cu = driver()
    if not hasattr(cu, "cuStreamWriteValue64") or not hasattr(cu, "cuStreamWaitValue64"):
        return "this cuda-python has no cuStreamWriteValue64 / cuStreamWaitValue64"
    header = PoolHeader(bytes(16), MEMORY_CUDA, device, 1, 1, 0, SYNC_TIMELINE)
    fd = create_sealed("ros2_cuda_ipc-timeline-probe", header.metadata_size)
    try:
        with on_device(device):
            writer = Timeline(fd, header, writable=True)
            try:
                Timeline(fd, header, writable=False).close()
                stream = driver_call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
                try:
                    writer.signal(0, 1, int(stream))
                    reached = writer.wait(0, 1, int(stream))
                    driver_call(cu.cuStreamSynchronize, stream)
                finally:
                    cu.cuStreamDestroy(stream)
                if not reached and not writer.reached(0, 1):
                    return f"device {device}: a value written by a stream never arrived"
            finally:
                writer.close()
    except CudaDriverError as exc:
        return f"device {device}: {exc}"
    finally:
        os.close(fd)
    return None


class Timeline:
    """The timeline slots of one pool, mapped from its metadata ``fd`` and registered with CUDA on ``device``."""

    def __init__(self, fd: int, header: PoolHeader, writable: bool) -> None:
        self._device = header.device
        self._offset = header.timeline_offset
        self._writable = writable
        self._map: mmap.mmap | None = map_fd(fd, header.metadata_size, writable=writable)
        whole = np.frombuffer(self._map, np.uint8)
        self._host = int(whole.ctypes.data)
        del whole  # no buffer export may outlive this: the mapping closes in close()
        cu = driver()
        flags = cu.CU_MEMHOSTREGISTER_DEVICEMAP | cu.CU_MEMHOSTREGISTER_PORTABLE
        if not writable:
            flags |= cu.CU_MEMHOSTREGISTER_READ_ONLY
        try:
            with on_device(self._device):
                driver_call(cu.cuMemHostRegister, self._host, header.metadata_size, flags)
                try:
                    self._device_address = int(driver_call(cu.cuMemHostGetDevicePointer, self._host, 0))
                except BaseException:
                    cu.cuMemHostUnregister(self._host)
                    raise
        except BaseException:
            self._map.close()
            self._map = None
            raise

    def _slot(self, block_id: int) -> int:
        return self._offset + 8 * block_id

    def reached(self, block_id: int, value: int) -> bool:
        """Whether block ``block_id``'s slot holds ``value`` or a later one (a host read, no driver call)."""
        return ctypes.c_uint64.from_address(self._host + self._slot(block_id)).value >= value

    def signal(self, block_id: int, value: int, stream: int) -> None:
        """Enqueue on ``stream``: once the work before it is done, write ``value`` into the block's slot."""
        cu = driver()
        driver_call(cu.cuStreamWriteValue64, stream, self._device_address + self._slot(block_id), value,
                    cu.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT)

    def mark(self, block_id: int, value: int) -> None:
        """Write ``value`` into the block's slot from the host, for work that has already finished: what
        :meth:`signal` would enqueue, without a GPU command (the publisher's mapping only)."""
        if not self._writable:
            raise ValueError("a reader's timeline is read-only")
        ctypes.c_uint64.from_address(self._host + self._slot(block_id)).value = value

    def wait(self, block_id: int, value: int, stream: int) -> bool:
        """Order ``stream`` after the block's slot reaches ``value``; whether it had (then nothing is enqueued)."""
        if self.reached(block_id, value):
            return True
        cu = driver()
        driver_call(cu.cuStreamWaitValue64, stream, self._device_address + self._slot(block_id), value,
                    cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
        return False

    def drain(self, values: Sequence[int], seconds: float, usable: Callable[[], bool]) -> bool:
        """Wait on the host, at most ``seconds``, until each block's slot reaches ``values[block]``; whether they
        did (the writes queued on the slots are then done, and so is the work queued before each).  True at once
        when ``usable()`` says the context is broken: its queued work will never run, so nothing can write."""
        deadline = time.monotonic() + seconds
        pause = 0.0001
        for block_id, value in enumerate(values):
            while not self.reached(block_id, value):
                if not usable():
                    return True
                if time.monotonic() > deadline:
                    return False
                time.sleep(pause)
                pause = min(2 * pause, 0.01)
        return True

    def close(self) -> None:
        """Unregister and unmap (the caller has waited for the writes queued on it)."""
        mapping, self._map = self._map, None
        if mapping is None:
            return
        with on_device(self._device):
            driver().cuMemHostUnregister(self._host)
        mapping.close()


def close_timeline(timeline: Any) -> None:
    """Close ``timeline`` if there is one (event-synchronised pools have none)."""
    if timeline is not None:
        timeline.close()
