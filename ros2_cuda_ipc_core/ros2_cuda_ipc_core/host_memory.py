"""Host memory blocks: one sealed memfd, mapped read-write by the publisher and read-only by readers."""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Sequence

import numpy as np

from .errors import Ros2CudaIpcError
from .layout import MEMORY_HOST
from .memfd import check_sealed, create_sealed, map_fd
from .views import host_array

_NO_EVENT = np.zeros(64, dtype=np.uint8)


class _MappedBlocks:
    """A mapping of the pool's block memory and numpy views into it."""

    kind = MEMORY_HOST
    device = 0

    def __init__(self, mapping: mmap.mmap, size: int) -> None:
        self._map: mmap.mmap | None = mapping
        self.size = size
        self.base_address = int(np.frombuffer(mapping, dtype=np.uint8, count=1).ctypes.data)

    def address(self, offset: int) -> int:
        return self.base_address + offset

    def view(self, start: int, limit: int, shape: Sequence[int], dtype: object, strides: Sequence[int] | None,
             offset: int = 0, ready: bool = True, ordered_stream: int | None = None) -> np.ndarray:
        """A numpy array inside the window ``[start, start + limit)``; read-only when the mapping is."""
        if self._map is None:
            raise Ros2CudaIpcError("this host memory is closed")
        return host_array(self._map, start, limit, shape, dtype, strides, offset)

    def record_ready(self, block_id: int, stream: object) -> np.ndarray:
        """Host writes are done when the writer returns: no event, a zero handle."""
        return _NO_EVENT

    def wait_ready(self, desc: object, stream: int) -> bool:
        """Host blocks are complete when published: nothing to wait for."""
        return True

    def release_after(self, stream: int, release: Callable[[], None]) -> None:
        """Host reads are done when the reader lets go: release at once."""
        release()

    def close(self) -> None:
        """Unmap now, or, while numpy views still use the mapping, let it go with the last of them."""
        mapping, self._map = self._map, None
        if mapping is not None:
            with contextlib.suppress(BufferError):  # views hold the mmap object: it unmaps when they are gone
                mapping.close()


class HostMemory(_MappedBlocks):
    """The publisher's side: creates the memfd and keeps it to hand out."""

    def __init__(self, size: int, name: str) -> None:
        self.fd = create_sealed(name, size)
        super().__init__(map_fd(self.fd, size, writable=True), size)

    def close(self) -> None:
        super().close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ImportedHostMemory(_MappedBlocks):
    """A reader's side: maps a peer's memfd read-only, after checking it cannot shrink under us."""

    def __init__(self, fd: int, size: int) -> None:
        check_sealed(fd, size, "the pool's block memory")
        super().__init__(map_fd(fd, size, writable=False), size)
