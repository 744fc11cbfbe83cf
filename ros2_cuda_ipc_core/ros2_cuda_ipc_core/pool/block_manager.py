"""``BlockManager``: a publisher's pool of blocks, its metadata, leases and FD server."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import mmap
import numbers
import os
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

from ..direct.channels import CHANNEL_COUNTERS, DirectChannels
from ..errors import PoolUnavailableError, Ros2CudaIpcError
from ..memory import cuda_driver
from ..memory.host_memory import HostMemory
from ..memory.layout import (
    MEMORY_CUDA,
    MEMORY_HOST,
    MEMORY_NAMES,
    BlockRecord,
    Metadata,
    PoolHeader,
)
from ..memory.memfd import create_sealed, map_fd, seal_writes
from ..stats import Counters
from ..throttle import Throttle
from .fd_server import SERVER_COUNTERS, FdServer
from .fork_safety import close_in_forked_children, forget_in_forked_children
from .imported_pool import ImportedPool
from .leases import FIRST_BLOCK_LEASE, LIVENESS_LEASE, LeaseFile, reopen
from .publish_block import PublishBlock
from .socket_names import pool_socket_path, remove_stale_sockets

log = logging.getLogger("ros2_cuda_ipc")
MemoryKind = Literal["host", "cuda", "auto"]

#: Seconds a published block is not reused (see docs/decisions.md): 4 blocks then allow at most 400 publishes a second.
DEFAULT_REUSE_DELAY = 0.01

#: Seconds without a free block after which the pool says who holds its blocks (then at most every 10 s).
STARVED_AFTER = 2.0

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
        self.counters = Counters("published", "cancelled", "acquire_misses", *SERVER_COUNTERS, *CHANNEL_COUNTERS)
        self._closed = False
        self._lock = threading.Lock()  # acquire and publish may come from several executor threads
        self._borrowed: set[int] = set()
        self._local_imports: weakref.WeakSet[ImportedPool] = weakref.WeakSet()
        self._next_uid = 1
        self._starved_since: float | None = None  # when acquires began to find no free block
        self._starved_log = Throttle(10.0)
        if socket_dir is not None:
            remove_stale_sockets(socket_dir)
        self.socket_path = pool_socket_path(self.pool_id, self.publisher_pid, socket_dir)

        with contextlib.ExitStack() as undo:
            if kind == MEMORY_CUDA:
                from ..memory.cuda_memory import CudaMemory

                cuda_memory = CudaMemory(byte_size, block_count, device)
                self._memory: CudaMemory | HostMemory = cuda_memory
            else:
                self._memory = HostMemory(-(-byte_size // mmap.PAGESIZE) * mmap.PAGESIZE * block_count,
                                          f"ros2_cuda_ipc-{self.pool_id.hex()[:8]}")
            undo.callback(self._memory.close)
            self.block_size = self._memory.size // block_count
            self.header = PoolHeader(self.pool_id, kind, device if kind == MEMORY_CUDA else 0,
                                     block_count, self.block_size, self.publisher_pid)
            self._metadata_fd = create_sealed(f"ros2_cuda_ipc-meta-{self.pool_id.hex()[:8]}", self.header.metadata_size)
            undo.callback(os.close, self._metadata_fd)
            if kind == MEMORY_CUDA:  # before the seal: the timeline's own mapping is a writable one
                sync = cuda_memory.attach_timeline(self._metadata_fd, self.header)
                self.header = dataclasses.replace(self.header, sync=sync)
            self.metadata = Metadata(map_fd(self._metadata_fd, self.header.metadata_size, writable=True), self.header)
            self.metadata.write_header()
            self.leases = LeaseFile(reopen(self._metadata_fd, writable=True))  # write locks need a writable one
            undo.callback(self.leases.close)
            seal_writes(self._metadata_fd)  # mapped and reopened: from here on nobody else can write it
            if not self.leases.try_write(LIVENESS_LEASE):
                raise Ros2CudaIpcError("could not take the pool's liveness lock")
            self._published_ns = [0] * block_count
            #: Subscribers reading this pool's publications directly (DESIGN §14); the typed publisher writes them.
            self.direct = DirectChannels(self.counters, self.pool_id.hex()[:8])
            self._server = FdServer(self.socket_path, self.header.pack(), [self._metadata_fd, self._memory.fd],
                                    allowed_uids or (), self.counters, fresh=[True, kind == MEMORY_HOST],
                                    channels=self.direct)
            undo.pop_all()
        local_pools[self.pool_id] = self
        close_in_forked_children(self)
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
            self._note_starved()
        elif self._starved_since is not None:
            self._starved_since = None
        return block

    def _note_starved(self) -> None:
        """Say (at most every 10 s) who holds the blocks once no block was free for ``STARVED_AFTER`` seconds."""
        now = time.monotonic()
        if self._starved_since is None:
            self._starved_since = now
        elif now - self._starved_since >= STARVED_AFTER and self._starved_log.ready():
            held = ", ".join(f"block {b}: pid {' '.join(map(str, pids))}" for b, pids in self.holders().items())
            log.warning("pool %s found no free block for %.0f s (%d misses so far); held by readers: %s",
                        self.pool_id.hex()[:8], now - self._starved_since, self.counters.snapshot()["acquire_misses"],
                        held or "none (borrowed by this publisher, or just published)")

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
            if block_id in self._borrowed or not self.leases.try_write(FIRST_BLOCK_LEASE + block_id):
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
            self.leases.release(FIRST_BLOCK_LEASE + block_id)
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
        return sum(self.leases.held_by_others(FIRST_BLOCK_LEASE + b) for b in range(self.block_count))

    def holders(self) -> dict[int, list[int]]:
        """Which reader pids hold which blocks now: {block_id: [pid, ...]} for the blocks held (pids as the readers'
        pid namespace numbers them; -1 for a lock no reader of ours takes)."""
        if self._closed:
            return {}
        found = {b: self.leases.holders(FIRST_BLOCK_LEASE + b) for b in range(self.block_count)}
        return {b: pids for b, pids in found.items() if pids}

    def stats(self) -> dict[str, Any]:
        """Counters (published, cancelled, acquire_misses; the FD server's fd_handouts, refused_peers,
        peer_limit_refusals, handout_failures, accept_pauses, malformed_requests, direct_garbage; the direct path's
        direct_subscribed, direct_sent, direct_drops, direct_closed, direct_refused, direct_evicted, direct_stalls,
        direct_skipped) and gauges: blocks_held_by_readers, blocks_borrowed,
        direct_channels, and ``holders``, {block_id: [reader pids]} (see :meth:`holders`)."""
        stats: dict[str, Any] = dict(self.counters.snapshot())
        stats["direct_channels"] = self.direct.count()
        holders = self.holders()
        stats["blocks_held_by_readers"] = len(holders)
        stats["blocks_borrowed"] = len(self._borrowed)
        stats["holders"] = holders
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
        forget_in_forked_children(self)
        self._server.close()
        self.leases.close()  # drops the liveness lock: readers' next reads see the pool gone
        self.metadata.close()
        os.close(self._metadata_fd)
        self._metadata_fd = -1  # its number is free for any other file of this process from here on
        self._memory.close()

    def _close_in_child(self) -> None:
        """After ``fork()``: the child gives up its copies of the pool's socket, locks and fds, so a forked child
        neither answers for the pool nor keeps it looking alive to readers once this publisher is gone.  Nothing
        of a pool closed before the fork: its fds' numbers may name other files by then (a subprocess's pipes)."""
        if self._closed:
            return
        self._closed = True
        local_pools.pop(self.pool_id, None)
        self._server.close_in_child()
        self.leases.close()
        os.close(self._metadata_fd)
        if self._memory.fd >= 0:
            os.close(self._memory.fd)
            self._memory.fd = -1

    def __enter__(self) -> BlockManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"BlockManager({self.block_count} x {self.block_size} B, memory={self.memory!r}, "
                f"socket_path={self.socket_path!r}{', closed' if self._closed else ''})")
