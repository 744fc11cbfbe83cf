"""``ReadHandle``: a reader's lease on one published block, and read-only views of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import Ros2CudaIpcError
from ..memory.collected import when_collected
from ..memory.cross_device import PeerMapping, StagingBlock
from ..memory.layout import MEMORY_NAMES

if TYPE_CHECKING:
    from .descriptor import Descriptor
    from .imported_pool import ImportedPool


#: Tokens of a handle's shares: the handle's own, taken first and so given back last, and one per view.
_LAST, _VIEW = object(), object()


class ReadHandle:
    """A lease on a published block.  The lease lives until the handle is closed and every view is gone.

    The handle and its views count their shares here and hold one share of this process's lease on
    the block between them; the last of them to go gives it back, once (for CUDA, once the work
    queued on the read's stream has finished: one ordered release per read, not one per view).
    """

    __slots__ = ("__weakref__", "_desc", "_memory", "_open", "_pool", "_ready", "_shares", "_start", "_stream")

    def __init__(self, pool: ImportedPool, desc: Descriptor, stream: int, ready: bool = False,
                 memory: PeerMapping | StagingBlock | None = None) -> None:
        self._pool = pool
        self._desc = desc
        self._stream = stream
        self._ready = ready  # the producer's writes had finished when read: views order no consumer stream
        # Where views come from: the pool's mapping, that mapping seen from another GPU, or a copy on that GPU.
        self._memory: Any = pool.memory if memory is None else memory
        self._start = 0 if isinstance(memory, StagingBlock) else desc.block_id * pool.header.block_size
        self._open = [True]  # list.pop() is atomic: one close() wins even when two threads race
        # Popped atomically too: exactly one holder takes _LAST, the one that gives back.  view() appends its token
        # before it checks _open, and pops it again when refused: _LAST goes only once no share is left.
        self._shares = [_LAST]

    def __del__(self) -> None:
        self.close()  # dropped without close(): its share goes back all the same

    @property
    def device_ptr(self) -> int:
        """Address of the block's first byte in this process (device pointer for CUDA)."""
        return self._memory.address(self._start)

    @property
    def byte_size(self) -> int:
        """Bytes of payload the publisher put in the block."""
        return self._desc.byte_size

    @property
    def publisher_pid(self) -> int:
        """The process id the descriptor names as its publisher's: for bookkeeping (which life of a restarted
        publisher a frame came from), not a proof of anything."""
        return self._desc.publisher_pid

    @property
    def memory(self) -> str:
        return MEMORY_NAMES[self._desc.memory]

    @property
    def ready_at_read(self) -> bool:
        """Whether the producer's writes had finished when the block was read (host memory always): then no
        consumer stream was made to wait on the GPU.  A benchmark's way to tell a GPU wait from a slow host."""
        return self._ready

    @property
    def device_id(self) -> int:
        """The device the pool lives on (the descriptor's)."""
        return self._desc.device_id

    @property
    def device(self) -> int:
        """The device this handle's views are readable from: the consumer stream's, after a cross-device read."""
        return int(self._memory.device)

    @property
    def block_id(self) -> int:
        return self._desc.block_id

    @property
    def closed(self) -> bool:
        return not self._open

    def view(self, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None = None, offset: int = 0) -> Any:
        """A read-only view of the payload (numpy for host; DLPack / CUDA-array-interface for CUDA).

        ``strides`` are in bytes; the whole layout must fit in :attr:`byte_size`.
        """
        # The share is taken before the open check: a close() on another thread then either comes first and is
        # seen here, or leaves this share standing; checked first, the close could give the lease back under it.
        self._shares.append(_VIEW)
        try:
            if not self._open:
                raise Ros2CudaIpcError("this ReadHandle is closed; read the descriptor again")
            view = self._memory.view(self._start, self._desc.byte_size, shape, dtype, strides, offset,
                                          ready=self._ready, ordered_stream=self._stream)
        except BaseException:
            self._drop_share()
            raise
        # A host view's slices are based on its block window (the view's own base), not on the view: the window
        # lives exactly as long as any of them.
        when_collected(view.base if type(view) is np.ndarray else view, self._drop_share)
        return view

    def _drop_share(self) -> None:
        if self._shares.pop() is not _LAST:
            return
        if isinstance(self._memory, StagingBlock):
            self._memory.release_after(self._stream)  # the pool's block went back once the copy had run
        else:
            self._pool.release_after(self._desc.block_id, self._stream, self._memory)

    def close(self) -> None:
        """Give up this handle's share of the lease (views taken from it keep theirs)."""
        try:
            self._open.pop()
        except (IndexError, AttributeError):  # closed already (AttributeError: __init__ never finished)
            return
        self._drop_share()

    def __enter__(self) -> ReadHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ReadHandle(block_id={self.block_id}, byte_size={self.byte_size}, memory={self.memory!r}"
                f"{', closed' if self.closed else ''})")
