"""``FrameRing``: a fixed set of buffers that frames are copied into: host, page-locked host, or device memory.

A download into pageable memory makes the driver stage it and return only when it is done; into
page-locked (pinned) memory it is a true asynchronous DMA on the side stream.  A recording that encodes
CUDA frames on the GPU (JPEG through nvJPEG) copies them into device buffers instead, so no raw frame
crosses to the host.  The ring is the recorder's queue bound too: a frame that finds no free buffer is
dropped and counted, never waited for.  A buffer too small for a frame is made again at its size.  A frame
written from its own block (a dense host frame) takes a slot of the ring and no memory (``take(0)``): the
ring bounds the leases the recorder holds too.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ros2_cuda_ipc_core import CudaArray

__all__ = ["FrameRing", "RingBuffer", "RingKind"]

#: host: numpy memory (host frames); pinned: cuMemAllocHost (CUDA frames to the host); device: CUDA memory.
RingKind = Literal["host", "pinned", "device"]


class RingBuffer:
    """``size`` bytes at :attr:`address` (a device pointer for ``device``), made through cuda.core for CUDA;
    device memory comes from the pool ordered on ``stream`` (the cuda.core side stream its copies run on)."""

    def __init__(self, size: int, kind: RingKind, device: int = 0, stream: Any = None) -> None:
        self.size, self.kind, self.device = size, kind, device
        self._cuda: Any = None
        self._host: np.ndarray | None = None
        if kind == "host":
            self._host = np.empty(max(size, 1), dtype=np.uint8)
            self.address = self._host.ctypes.data
            return
        if kind == "pinned":
            from cuda.core import LegacyPinnedMemoryResource

            self._cuda = LegacyPinnedMemoryResource().allocate(max(size, 1))
        else:
            from cuda.core import Device

            self._cuda = Device(device).allocate(max(size, 1), stream=stream)
        self.address = int(self._cuda.handle)

    def array(self, shape: Sequence[int]) -> Any:
        """The first bytes as a dense uint8 array of ``shape``, no copy: numpy on the host, a ``CudaArray`` on
        the device (valid while the buffer lives)."""
        length = int(np.prod(shape))
        if length > self.size:
            raise ValueError(f"{length} bytes asked of a {self.size}-byte buffer")
        if self.kind == "device":
            return CudaArray(self.address, tuple(shape), None, np.uint8, self.device, True, self)
        if self._host is not None:
            return self._host[:length].reshape(shape)
        raw = (ctypes.c_uint8 * max(length, 1)).from_address(self.address)
        return np.ctypeslib.as_array(raw)[:length].reshape(shape)

    def close(self) -> None:
        if self._cuda is not None:
            self._cuda.close()
            self._cuda = None


class FrameRing:
    """``count`` buffers of :attr:`kind` (set at the first frame, when its memory is known: a buffer of
    another kind is made again when it is next taken);
    :meth:`take` one of at least ``size`` bytes (None when all are out), :meth:`give` it back."""

    def __init__(self, count: int, kind: RingKind = "host", device: int = 0, in_place_limit: int = 2) -> None:
        if count < 1:
            raise ValueError(f"a ring of {count} buffers")
        self.count, self.kind, self.device = count, kind, device
        self.in_place_limit = in_place_limit
        self._in_place = 0
        self.stream: Any = None  #: the cuda.core stream device buffers are allocated on
        self._free: list[RingBuffer | None] = [None] * count  # made on first use, at the first frame's size
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        return self.count - len(self._free)

    def take(self, size: int) -> RingBuffer | None:
        with self._lock:
            if not self._free:
                return None
            buffer = self._free.pop()
        if size == 0:  # a slot, no memory: whatever the slot holds comes back with it
            return buffer if buffer is not None else RingBuffer(0, "host")
        if buffer is None or buffer.size < size or (buffer.kind, buffer.device) != (self.kind, self.device):
            if buffer is not None:
                buffer.close()
            try:
                buffer = RingBuffer(size, self.kind, self.device, self.stream)
            except BaseException:
                with self._lock:
                    self._free.append(None)  # the slot stays, to be made again
                raise
        return buffer

    def take_in_place(self) -> bool:
        """A frame may be written from its leased block (False: copy it into a buffer instead)."""
        with self._lock:
            if self._in_place >= self.in_place_limit:
                return False
            self._in_place += 1
            return True

    def give_in_place(self) -> None:
        with self._lock:
            self._in_place -= 1

    def give(self, buffer: RingBuffer) -> None:
        with self._lock:
            self._free.append(buffer)

    def close(self) -> None:
        with self._lock:
            for buffer in self._free:
                if buffer is not None:
                    buffer.close()
            self._free = []
