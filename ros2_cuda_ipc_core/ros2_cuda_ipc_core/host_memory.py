"""Host memory blocks: one sealed memfd, mapped read-write by the publisher and read-only by readers."""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Sequence

import numpy as np

from .errors import InvalidDescriptorError, Ros2CudaIpcError
from .layout import MEMORY_HOST
from .memfd import check_sealed, create_sealed, map_fd, seal_writes
from .views import host_array

_NO_EVENT = np.zeros(64, dtype=np.uint8)


class _MappedBlocks:
    """Mappings of the pool's block memory, each ``span`` bytes, and numpy views into them."""

    kind = MEMORY_HOST
    device = 0

    def __init__(self, mappings: list[mmap.mmap], span: int) -> None:
        self._maps: list[mmap.mmap] | None = mappings
        self.size = span * len(mappings)
        self._span = span
        self._addresses = [int(np.frombuffer(m, dtype=np.uint8, count=1).ctypes.data) for m in mappings]

    def address(self, offset: int) -> int:
        mapping, within = divmod(offset, self._span)
        return self._addresses[mapping] + within

    def view(self, start: int, limit: int, shape: Sequence[int], dtype: object, strides: Sequence[int] | None,
             offset: int = 0, ready: bool = True, ordered_stream: int | None = None) -> np.ndarray:
        """A numpy array inside the window ``[start, start + limit)``; read-only when the mapping is.
        Its ``base`` is the mapping the window lies in: a reader's holds that block alone."""
        if self._maps is None:
            raise Ros2CudaIpcError("this host memory is closed")
        mapping, within = divmod(start, self._span)
        return host_array(self._maps[mapping], within, limit, shape, dtype, strides, offset)

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
        """Unmap now, or, while numpy views still use a mapping, let it go with the last of them."""
        mappings, self._maps = self._maps, None
        for mapping in mappings or ():
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
        super().__init__([mapping], size)

    def close(self) -> None:
        super().close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ImportedHostMemory(_MappedBlocks):
    """A reader's side: maps a peer's memfd read-only, one mapping per block, after checking it is sealed.

    One mapping per block, so that a view's ``base`` (``np.asarray(view).base``) reaches its own block
    and nothing else of the pool: no frame is read without its lease.
    """

    def __init__(self, fd: int, block_count: int, block_size: int) -> None:
        check_sealed(fd, block_count * block_size, "the pool's block memory")
        if block_size % mmap.PAGESIZE:
            raise InvalidDescriptorError(f"host blocks of {block_size} bytes are not whole {mmap.PAGESIZE}-byte pages")
        mappings: list[mmap.mmap] = []
        try:
            for block in range(block_count):
                mappings.append(map_fd(fd, block_size, writable=False, offset=block * block_size))
        except BaseException:
            for mapping in mappings:
                mapping.close()
            raise
        super().__init__(mappings, block_size)
