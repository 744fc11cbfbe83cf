"""Host memory blocks: one sealed memfd, mapped read-write by the publisher and read-only by readers."""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import Ros2CudaIpcError
from .layout import MEMORY_HOST
from .memfd import check_sealed, create_sealed, map_fd, seal_writes
from .views import host_array

_NO_EVENT = np.zeros(64, dtype=np.uint8)


class _MappedBlocks:
    """One mapping of the pool's block memory, and numpy views into it, each based on a window of its own block.

    A view's ``base`` (``np.asarray(view).base``) is a byte array over the view's block alone, made for that
    view, so nothing of the pool's other blocks is one ``np.frombuffer`` away from a reader holding one lease
    (numpy would resolve a memoryview base to the whole mmap).  Slices of the view are based on that window
    too: it is what lives exactly as long as any of them (the read's lease is tied to it).  One mapping, not one per block:
    Python's ``mmap`` keeps a duplicate fd per mapping.
    """

    kind = MEMORY_HOST
    device = 0

    def __init__(self, mapping: mmap.mmap, block_size: int) -> None:
        self._map: mmap.mmap | None = mapping
        self._bytes: memoryview | None = memoryview(mapping)
        self.size = len(mapping)
        self._block_size = block_size
        self.base_address = int(np.frombuffer(mapping, dtype=np.uint8, count=1).ctypes.data)

    def address(self, offset: int) -> int:
        return self.base_address + offset

    def view(self, start: int, limit: int, shape: Sequence[int], dtype: object, strides: Sequence[int] | None,
             offset: int = 0, ready: bool = True, ordered_stream: int | None = None) -> np.ndarray:
        """A numpy array inside the window ``[start, start + limit)`` of one block; read-only when the mapping is."""
        if self._bytes is None:
            raise Ros2CudaIpcError("this host memory is closed")
        first = start - start % self._block_size
        window = np.frombuffer(self._bytes[first:first + self._block_size], np.uint8)
        return host_array(window, start - first, limit, shape, dtype, strides, offset)

    def record_ready(self, block_id: int, uid: int, stream: object) -> np.ndarray:
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
        whole, self._bytes = self._bytes, None
        if whole is not None:
            whole.release()  # its slices, under live views, keep the mapping until they go
        if mapping is not None:
            with contextlib.suppress(BufferError):  # views hold the mmap object: it unmaps when they are gone
                mapping.close()


class HostMemory(_MappedBlocks):
    """The publisher's side: creates the memfd, maps it writable once, then seals it against any other writer."""

    def __init__(self, size: int, name: str) -> None:
        self.fd = create_sealed(name, size)
        try:
            mapping = map_fd(self.fd, size, writable=True)
            seal_writes(self.fd)
        except BaseException:
            os.close(self.fd)
            raise
        super().__init__(mapping, size)

    def close(self) -> None:
        super().close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ImportedHostMemory(_MappedBlocks):
    """A reader's side: maps a peer's memfd read-only, after checking it is sealed."""

    def __init__(self, fd: int, block_count: int, block_size: int) -> None:
        check_sealed(fd, block_count * block_size, "the pool's block memory")
        super().__init__(map_fd(fd, block_count * block_size, writable=False), block_size)
