"""``PublishBlock``: one borrowed block, writable until it is published or cancelled."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ros2_cuda_ipc_msgs.msg import BufferCore

from ..errors import Ros2CudaIpcError
from ..memory.layout import PoolHeader
from ..memory.streams import StreamLike

if TYPE_CHECKING:
    from collections.abc import Callable


class BlockSource(Protocol):
    """What a block reads of the pool that made it (a ``BlockManager``, which imports this module)."""

    @property
    def block_size(self) -> int: ...
    @property
    def memory(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def socket_path(self) -> str: ...
    @property
    def pool_id_array(self) -> Any: ...
    @property
    def publisher_pid(self) -> int: ...
    @property
    def header(self) -> PoolHeader: ...


class PublishBlock:
    """A block the publisher holds the write lease on.  Use it as a context manager: unpublished means cancelled."""

    __slots__ = ("_done", "_finish", "_memory", "_pool", "block_id", "uid")

    def __init__(self, pool: BlockSource, block_id: int, uid: int, memory: Any,
                 finish: Callable[[int, int, int, int], None]) -> None:
        """Made by the pool, which hands over its block ``memory`` and how to ``finish`` a block
        (record the publication or cancellation and drop the write lease)."""
        self._pool = pool
        self._memory = memory
        self._finish = finish
        self.block_id = block_id
        self.uid = uid
        self._done = False

    @property
    def offset(self) -> int:
        """Byte offset of this block in the pool's memory."""
        return self.block_id * self._pool.block_size

    @property
    def device_ptr(self) -> int:
        """Address of the block: a device pointer for CUDA, a host address for host memory."""
        return self._memory.address(self.offset)

    @property
    def capacity(self) -> int:
        """Bytes this block can hold."""
        return self._pool.block_size

    @property
    def memory(self) -> str:
        return self._pool.memory

    def view(self, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None = None, offset: int = 0) -> Any:
        """A writable view of the block, its first element ``offset`` bytes in: a numpy array (host) or a
        DLPack / CUDA-array-interface object (CUDA)."""
        self._check_open()
        return self._memory.view(self.offset, self.capacity, shape, dtype, strides, offset)

    def prepare_publish(self, stream: StreamLike = None, byte_size: int | None = None,
                        into: BufferCore | None = None) -> BufferCore:
        """Mark the block ready once ``stream``'s work so far is done, release it, and describe it.

        Put the returned ``BufferCore`` into the message you publish.  ``byte_size`` defaults to the
        whole block.  ``into``: a ``BufferCore`` to fill (the one inside your message) instead of a new one.
        """
        self._check_open()
        size = self.capacity if byte_size is None else int(byte_size)
        if not 0 < size <= self.capacity:
            raise ValueError(f"byte_size={byte_size} is outside this block's 1..{self.capacity} bytes")
        pool = self._pool
        core = BufferCore() if into is None else into
        try:  # filled before the block is marked published: a wrong ``into`` leaves it borrowed, not lost
            core.socket_path = pool.socket_path
            core.pool_id = pool.pool_id_array
            core.block_id = self.block_id
            core.uid = self.uid
            core.publisher_pid = pool.publisher_pid
            core.memory = pool.header.memory
            core.device_id = pool.header.device
            core.byte_size = size
        except AttributeError:
            raise TypeError(f"into= takes a BufferCore (the one inside your message), not {type(into).__name__}") from None
        core.event_handle = self._memory.record_ready(self.block_id, self.uid, stream)
        self._done = True
        self._finish(self.block_id, self.uid, time.monotonic_ns(), size)
        return core

    def cancel(self) -> None:
        """Give the block back unpublished; it is reusable at once and old descriptors of it go stale."""
        if not self._done:
            self._done = True
            if not self._pool.closed:
                self._finish(self.block_id, self.uid, 0, 0)

    def _check_open(self) -> None:
        if self._done:
            raise Ros2CudaIpcError(f"block {self.block_id} was already published or cancelled; acquire a new one")
        if self._pool.closed:
            raise Ros2CudaIpcError("the pool of this block is closed")

    def __enter__(self) -> PublishBlock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    def __repr__(self) -> str:
        state = "done" if self._done else "borrowed"
        return f"PublishBlock(block_id={self.block_id}, uid={self.uid}, {self.memory}, {state})"
