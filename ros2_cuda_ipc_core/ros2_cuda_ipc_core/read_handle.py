"""``ReadHandle``: a reader's lease on one published block, and read-only views of it."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import Ros2CudaIpcError
from .layout import MEMORY_NAMES

if TYPE_CHECKING:
    from .descriptor import Descriptor
    from .imported_pool import ImportedPool


class BlockLease:
    """Counts the users of a block lease (the handle and each view) and gives it back after the last."""

    __slots__ = ("__weakref__", "_lock", "_release", "_users")

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._users = 1
        self._lock = threading.Lock()

    def retain(self) -> None:
        with self._lock:
            self._users += 1

    def drop(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users == 0
        if last:
            self._release()


class ReadHandle:
    """A lease on a published block.  The lease lives until the handle is closed and every view is gone."""

    def __init__(self, pool: ImportedPool, desc: Descriptor, stream: int) -> None:
        self._pool = pool
        self._desc = desc
        self._stream = stream
        self._start = desc.block_id * pool.header.block_size
        self._lease = BlockLease(functools.partial(pool.release_after, desc.block_id, stream))
        self._closer = weakref.finalize(self, self._lease.drop)

    @property
    def device_ptr(self) -> int:
        """Address of the block's first byte in this process (device pointer for CUDA)."""
        return self._pool.memory.address(self._start)

    @property
    def byte_size(self) -> int:
        """Bytes of payload the publisher put in the block."""
        return self._desc.byte_size

    @property
    def memory(self) -> str:
        return MEMORY_NAMES[self._desc.memory]

    @property
    def device_id(self) -> int:
        return self._desc.device_id

    @property
    def block_id(self) -> int:
        return self._desc.block_id

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def view(self, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None = None, offset: int = 0) -> Any:
        """A read-only view of the payload (numpy for host; DLPack / CUDA-array-interface for CUDA).

        ``strides`` are in bytes; the whole layout must fit in :attr:`byte_size`.
        """
        if self.closed:
            raise Ros2CudaIpcError("this ReadHandle is closed; read the descriptor again")
        view = self._pool.memory.view(self._start, self.byte_size, shape, dtype, strides, offset)
        self._lease.retain()
        weakref.finalize(view, self._lease.drop)
        return view

    def close(self) -> None:
        """Give up this handle's share of the lease (views taken from it keep theirs)."""
        self._closer()

    def __enter__(self) -> ReadHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ReadHandle(block_id={self.block_id}, byte_size={self.byte_size}, memory={self.memory!r}"
                f"{', closed' if self.closed else ''})")
