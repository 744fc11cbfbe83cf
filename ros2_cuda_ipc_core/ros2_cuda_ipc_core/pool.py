"""``BlockManager``: a publisher's pool of blocks, its metadata, leases and FD server."""

from __future__ import annotations

import contextlib
import logging
import math
import mmap
import numbers
import os
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np

from . import cuda_driver
from .errors import PoolUnavailableError, Ros2CudaIpcError
from .fd_server import FdServer
from .host_memory import HostMemory
from .imported_pool import ImportedPool
from .layout import (
    FIRST_BLOCK_BYTE,
    LIVENESS_BYTE,
    MEMORY_CUDA,
    MEMORY_HOST,
    MEMORY_NAMES,
    BlockRecord,
    Metadata,
    PoolHeader,
)
from .leases import LeaseFile, reopen
from .memfd import create_sealed, map_fd
from .publish_block import PublishBlock
from .stats import Counters

log = logging.getLogger("ros2_cuda_ipc")
MemoryKind = Literal["host", "cuda", "auto"]

#: Seconds a published block is not reused (see docs/decisions.md): 4 blocks then allow at most 400 publishes a second.
DEFAULT_REUSE_DELAY = 0.01

#: Pools of this process by pool_id, for the same-process read path.
local_pools: weakref.WeakValueDictionary[bytes, BlockManager] = weakref.WeakValueDictionary()


def check_reuse_delay(seconds: float) -> float:
    """``seconds`` as a float if it can be a pool's ``reuse_delay`` (finite, not negative), else a ValueError saying why."""
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"reuse_delay must be a finite number of seconds >= 0, got {seconds!r}")
    return float(seconds)


def choose_memory(memory: str, device: int) -> int:
    """Resolve 'host' / 'cuda' / 'auto' to a memory kind; 'auto' says which it picked and why."""
    if memory == "host":
        return MEMORY_HOST
    if memory == "cuda":
        cuda_driver.require_cuda(device)
        return MEMORY_CUDA
    if memory == "auto":
        reason = cuda_driver.unavailable_reason(device)
        if reason is None:
            log.info("memory='auto' chose CUDA device %d", device)
            return MEMORY_CUDA
        log.info("memory='auto' chose host memory: %s", reason)
        return MEMORY_HOST
    raise ValueError(f"memory={memory!r}: expected 'host', 'cuda' or 'auto'")


class BlockManager:
    """A pool of ``block_count`` blocks of at least ``byte_size`` bytes, shared with readers by descriptor.

    Borrow a block with :meth:`acquire_for_publish`, fill it, publish the descriptor
    :meth:`PublishBlock.prepare_publish` returns.  A block is reused only when no reader
    holds it and ``reuse_delay`` seconds have passed since it was published.
    """

    def __init__(self, byte_size: int, block_count: int = 4, memory: MemoryKind = "auto", device: int = 0,
                 reuse_delay: float = DEFAULT_REUSE_DELAY, socket_dir: str | os.PathLike[str] | None = None,
                 allowed_uids: Iterable[int] | None = None) -> None:
        if byte_size <= 0 or block_count <= 0:
            raise ValueError(f"a pool needs byte_size > 0 and block_count > 0, got {byte_size} and {block_count}")
        reuse_delay = check_reuse_delay(reuse_delay)
        kind = choose_memory(memory, device)
        self.pool_id = os.urandom(16)
        self.publisher_pid = os.getpid()  # per pool, not per message: getpid() is a syscall
        self.pool_id_array = np.frombuffer(self.pool_id, dtype=np.uint8)  # shared by every descriptor, never written
        self.reuse_delay = reuse_delay
        self.counters = Counters("published", "cancelled", "acquire_misses", "fd_handouts", "refused_peers")
        self._closed = False
        self._lock = threading.Lock()  # acquire and publish may come from several executor threads
        self._borrowed: set[int] = set()
        self._local_imports: weakref.WeakSet[ImportedPool] = weakref.WeakSet()
        self._next_uid = 1
        if socket_dir is None:
            self.socket_path = f"@ros2_cuda_ipc/{os.getpid()}/{self.pool_id.hex()}"
        else:
            self.socket_path = str(Path(socket_dir).resolve() / f"ros2_cuda_ipc-{self.pool_id.hex()[:16]}.sock")

        with contextlib.ExitStack() as undo:
            if kind == MEMORY_CUDA:
                from .cuda_memory import CudaMemory

                self._memory: CudaMemory | HostMemory = CudaMemory(byte_size, block_count, device)
            else:
                self._memory = HostMemory(-(-byte_size // mmap.PAGESIZE) * mmap.PAGESIZE * block_count,
                                          f"ros2_cuda_ipc-{self.pool_id.hex()[:8]}")
            undo.callback(self._memory.close)
            self.block_size = self._memory.size // block_count
            self.header = PoolHeader(self.pool_id, kind, device if kind == MEMORY_CUDA else 0,
                                     block_count, self.block_size)
            self._metadata_fd = create_sealed(f"ros2_cuda_ipc-meta-{self.pool_id.hex()[:8]}", self.header.metadata_size)
            undo.callback(os.close, self._metadata_fd)
            self.metadata = Metadata(map_fd(self._metadata_fd, self.header.metadata_size, writable=True), self.header)
            self.metadata.write_header()
            self.leases = LeaseFile(reopen(self._metadata_fd, writable=True))
            undo.callback(self.leases.close)
            if not self.leases.try_write(LIVENESS_BYTE):
                raise Ros2CudaIpcError("could not take the pool's liveness lock")
            self._published_ns = [0] * block_count
            self._server = FdServer(self.socket_path, self.header.pack(), [self._metadata_fd, self._memory.fd],
                                    allowed_uids or (), self.counters)
            undo.pop_all()
        local_pools[self.pool_id] = self
        log.info("pool %s: %d %s blocks of %d bytes, fds served at %s", self.pool_id.hex()[:8], block_count,
                 MEMORY_NAMES[kind], self.block_size, self.socket_path)

    # --- properties -----------------------------------------------------------------------------

    @property
    def memory(self) -> str:
        """'host' or 'cuda': what ``memory='auto'`` resolved to."""
        return MEMORY_NAMES[self.header.memory]

    @property
    def block_count(self) -> int:
        return self.header.block_count

    @property
    def device(self) -> int:
        return self.header.device

    @property
    def closed(self) -> bool:
        return self._closed

    # --- publishing -----------------------------------------------------------------------------

    def acquire_for_publish(self, timeout: float = 0.0) -> PublishBlock | None:
        """Borrow the least recently published free block; wait up to ``timeout`` s; None if none is free."""
        if self._closed:
            raise Ros2CudaIpcError(f"pool {self.pool_id.hex()[:8]} is closed")
        block = self._try_acquire()
        if block is None and timeout > 0:
            deadline = time.monotonic() + timeout
            pause = 0.0002
            while block is None and (left := deadline - time.monotonic()) > 0:
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.002)
                block = self._try_acquire()
        if block is None:
            self.counters.add("acquire_misses")
        return block

    def _try_acquire(self) -> PublishBlock | None:
        with self._lock:
            return self._try_acquire_locked()

    def _try_acquire_locked(self) -> PublishBlock | None:
        now = time.monotonic_ns()
        delay_ns = int(self.reuse_delay * 1e9)
        for block_id in sorted(range(self.block_count), key=self._published_ns.__getitem__):
            published = self._published_ns[block_id]
            if published and now - published < delay_ns:
                return None  # every later candidate was published even more recently
            if block_id in self._borrowed or not self.leases.try_write(FIRST_BLOCK_BYTE + block_id):
                continue
            uid, self._next_uid = self._next_uid, self._next_uid + 1
            self._borrowed.add(block_id)
            return PublishBlock(self, block_id, uid, self._memory, self._finish)
        return None

    def _finish(self, block_id: int, uid: int, published_ns: int, byte_size: int) -> None:
        """Called by PublishBlock: record the publication (or cancellation) and drop the write lock."""
        with self._lock:
            self.metadata.write_record(block_id, BlockRecord(uid, published_ns, byte_size))
            self._published_ns[block_id] = published_ns
            self._borrowed.discard(block_id)
            self.leases.release(FIRST_BLOCK_BYTE + block_id)
        self.counters.add("published" if published_ns else "cancelled")

    # --- the same-process read path -----------------------------------------------------------

    def same_process_import(self) -> ImportedPool:
        """This pool as a reader in this very process imports it: its own read-only mapping and lease file,
        retired when the pool closes (an IPC handle cannot be opened in the process that made it)."""
        with self._lock:
            if self._closed:
                raise PoolUnavailableError(f"pool {self.pool_id.hex()[:8]} is closed; no new reads from it")
            imported = ImportedPool(self.header, self._metadata_fd, self._memory.fd, self.socket_path,
                                    local_memory=self._memory)
            self._local_imports.add(imported)
        return imported

    # --- observability and lifetime -------------------------------------------------------------

    def blocks_held_by_readers(self) -> int:
        return sum(self.leases.held_by_others(FIRST_BLOCK_BYTE + b) for b in range(self.block_count))

    def stats(self) -> dict[str, int]:
        """Counters: published, cancelled, acquire_misses, fd_handouts, refused_peers, blocks_held_by_readers."""
        stats = self.counters.snapshot()
        stats["blocks_held_by_readers"] = 0 if self._closed else self.blocks_held_by_readers()
        stats["blocks_borrowed"] = len(self._borrowed)
        return stats

    def close(self) -> None:
        """Stop serving fds and give back this process's memory, fds and events: at once, or, while views
        (or DLPack tensors made from them) are alive, as soon as the last of them goes.  Readers in
        other processes keep their mappings until they let go."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            local_imports = list(self._local_imports)
        local_pools.pop(self.pool_id, None)
        for imported in local_imports:  # same-process readers: no new reads, closed once their views are gone
            imported.retire()
        self._server.close()
        self.leases.close()  # drops the liveness lock: readers' next reads see the pool gone
        self.metadata.close()
        os.close(self._metadata_fd)
        self._memory.close()

    def __enter__(self) -> BlockManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"BlockManager({self.block_count} x {self.block_size} B, memory={self.memory!r}, "
                f"socket_path={self.socket_path!r}{', closed' if self._closed else ''})")
