"""``Reader``: turns descriptors into leased, read-only views of the publisher's memory."""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from .cuda_driver import require_cuda
from .descriptor import Descriptor
from .errors import InvalidDescriptorError, PoolUnavailableError, StaleDescriptorError
from .fd_client import fetch_pool_fds
from .imported_pool import ImportedPool, close_fds
from .layout import MEMORY_CUDA
from .pool import local_pools
from .read_handle import ReadHandle
from .stats import Counters
from .streams import StreamLike, stream_handle

log = logging.getLogger("ros2_cuda_ipc")


class Reader:
    """Reads descriptors from any number of pools; imports each pool once and keeps it cached.

    ``allowed_uids`` widens which users' pools are trusted (this user always is).  At most
    ``max_pools`` idle pools stay imported; pools whose publisher is gone are dropped.
    """

    def __init__(self, allowed_uids: Iterable[int] | None = None, max_pools: int = 16,
                 connect_timeout: float = 1.0) -> None:
        self.allowed_uids = frozenset(allowed_uids or ())
        self.max_pools = max_pools
        self.connect_timeout = connect_timeout
        self._pools: OrderedDict[bytes, ImportedPool] = OrderedDict()
        self._lock = threading.RLock()  # the cache, for multi-threaded executors; leases have their own lock
        self.counters = Counters("reads", "stale_drops", "invalid_descriptors", "unavailable", "imports",
                                 "same_process_reads", "evictions")

    def read(self, core: Any, stream: StreamLike = None) -> ReadHandle:
        """Lease the block ``core`` describes and order ``stream`` after the producer's writes.

        Raises :class:`StaleDescriptorError` if the block moved on, :class:`InvalidDescriptorError` for a
        descriptor that does not fit its pool, :class:`PoolUnavailableError` if the pool is gone.
        """
        try:
            desc = Descriptor.from_message(core)
            if desc.memory == MEMORY_CUDA:
                require_cuda(desc.device_id)
            pool = self._pool_for(desc)
            pool.check(desc)
            if not pool.same_process and not pool.publisher_alive():
                self._forget(desc.pool_id)
                raise PoolUnavailableError(f"the publisher of {pool.name} is gone; no new reads from it")
            handle_stream = stream_handle(stream)
            pool.lease(desc)
            try:
                pool.memory.wait_ready(desc, handle_stream)
            except BaseException:
                pool.release(desc.block_id)
                raise
        except StaleDescriptorError:
            self.counters.add("stale_drops")
            raise
        except InvalidDescriptorError:
            self.counters.add("invalid_descriptors")
            raise
        except PoolUnavailableError:
            self.counters.add("unavailable")
            raise
        self.counters.add("reads")
        if pool.same_process:
            self.counters.add("same_process_reads")
        return ReadHandle(pool, desc, handle_stream)

    def _pool_for(self, desc: Descriptor) -> ImportedPool:
        with self._lock:
            return self._pool_for_locked(desc)

    def _pool_for_locked(self, desc: Descriptor) -> ImportedPool:
        pool = self._pools.get(desc.pool_id)
        if pool is not None:
            self._pools.move_to_end(desc.pool_id)
            return pool
        local = local_pools.get(desc.pool_id) if desc.publisher_pid == os.getpid() else None
        if local is not None:
            pool = ImportedPool(local.header, local._metadata_fd, local._memory.fd, local.socket_path, local)
        else:
            header, fds = fetch_pool_fds(desc, self.allowed_uids, self.connect_timeout)
            try:
                pool = ImportedPool(header, fds[0], fds[1], desc.socket_path)
            except OSError as exc:
                raise PoolUnavailableError(f"{desc.pool_name}: could not map its memory: {exc}") from exc
            finally:
                close_fds(fds)
        self.counters.add("imports")
        self._pools[desc.pool_id] = pool
        self._evict()
        return pool

    def _evict(self) -> None:
        """Keep at most ``max_pools``: drop dead publishers' pools first, then the least recently used idle ones."""
        for pool_id, pool in list(self._pools.items()):
            if len(self._pools) <= self.max_pools:
                return
            if not pool.same_process and not pool.publisher_alive():
                self._forget(pool_id)
        for pool_id, pool in list(self._pools.items()):
            if len(self._pools) <= self.max_pools:
                return
            if pool.leases_held == 0:
                self._forget(pool_id)

    def _forget(self, pool_id: bytes) -> None:
        """Drop a pool from the cache; it closes once the last handle on it is gone."""
        with self._lock:
            if self._pools.pop(pool_id, None) is not None:
                self.counters.add("evictions")

    def stats(self) -> dict[str, int]:
        """Counters (reads, stale_drops, invalid_descriptors, unavailable, imports, same_process_reads, evictions)
        and gauges (pools_cached, leases_held)."""
        stats = self.counters.snapshot()
        with self._lock:
            stats["pools_cached"] = len(self._pools)
            stats["leases_held"] = sum(pool.leases_held for pool in self._pools.values())
        return stats

    def close(self) -> None:
        """Forget every pool; handles still open keep theirs until they close."""
        with self._lock:
            self._pools.clear()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
