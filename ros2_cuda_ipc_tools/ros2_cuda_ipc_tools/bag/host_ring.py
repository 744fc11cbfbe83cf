"""``HostRing``: a fixed set of host buffers that frames are downloaded into, page-locked for CUDA frames.

A download into pageable memory makes the driver stage it and return only when it is done; into
page-locked (pinned) memory it is a true asynchronous DMA on the side stream.  The ring is the
recorder's queue bound too: a frame that finds no free buffer is dropped and counted, never waited for.
A buffer too small for a frame is re-made at the frame's size while it is free.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

__all__ = ["HostBuffer", "HostRing"]


class HostBuffer:
    """``size`` bytes of host memory at :attr:`address`; pinned (``cuMemAllocHost`` through cuda.core) when
    ``pinned``."""

    def __init__(self, size: int, pinned: bool) -> None:
        self.size = size
        self._cuda: Any = None
        if pinned:
            from cuda.core import LegacyPinnedMemoryResource

            self._cuda = LegacyPinnedMemoryResource().allocate(max(size, 1))
            self.address = int(self._cuda.handle)
            self._host: np.ndarray | None = None
        else:
            self._host = np.empty(max(size, 1), dtype=np.uint8)
            self.address = self._host.ctypes.data

    def bytes(self, length: int) -> np.ndarray:
        """The first ``length`` bytes as a uint8 numpy array (no copy; valid while the buffer lives)."""
        if length > self.size:
            raise ValueError(f"{length} bytes asked of a {self.size}-byte buffer")
        if self._host is not None:
            return self._host[:length]
        return np.ctypeslib.as_array((ctypes.c_uint8 * max(length, 1)).from_address(self.address))[:length]

    def close(self) -> None:
        if self._cuda is not None:
            self._cuda.close()
            self._cuda = None


class HostRing:
    """``count`` buffers; :meth:`take` one of at least ``size`` bytes (None when all are out), :meth:`give` it back."""

    def __init__(self, count: int, pinned: bool) -> None:
        if count < 1:
            raise ValueError(f"a ring of {count} buffers")
        self.count, self.pinned = count, pinned
        self._free: list[HostBuffer | None] = [None] * count  # made on first use, at the first frame's size
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        return self.count - len(self._free)

    def take(self, size: int) -> HostBuffer | None:
        with self._lock:
            if not self._free:
                return None
            buffer = self._free.pop()
        if buffer is None or buffer.size < size:
            if buffer is not None:
                buffer.close()
            try:
                buffer = HostBuffer(size, self.pinned)
            except BaseException:
                with self._lock:
                    self._free.append(None)  # the slot stays, to be made again
                raise
        return buffer

    def give(self, buffer: HostBuffer) -> None:
        with self._lock:
            self._free.append(buffer)

    def close(self) -> None:
        with self._lock:
            for buffer in self._free:
                if buffer is not None:
                    buffer.close()
            self._free = []
