"""``Reader``: turns descriptors into leased, read-only views of the publisher's memory."""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from ..errors import (
    CudaUnavailableError,
    InvalidDescriptorError,
    PoolIdentityError,
    PoolUnavailableError,
    StaleDescriptorError,
)
from ..memory.cross_device import CrossDevice, PeerMapping, check_cross_device, choose_path, copy_to_device
from ..memory.cuda_driver import require_cuda
from ..memory.layout import MEMORY_CUDA
from ..memory.streams import StreamLike, stream_handle
from ..stats import Counters
from .block_manager import local_pools
from .descriptor import Descriptor, InstanceKey
from .failure_cache import FailureCache
from .fd_client import OtherPoolError, check_publisher_alive, check_socket_name, fetch_pool_fds
from .imported_pool import ImportedPool, close_fds
from .read_handle import ReadHandle

log = logging.getLogger("ros2_cuda_ipc")


class Reader:
    """Reads descriptors from any number of pools; imports each pool once and keeps it cached.

    ``allowed_uids`` widens which users' pools are trusted (this user always is).  At most
    ``max_pools`` pools stay imported.  A pool whose publisher closed or died leaves the cache and
    is unmapped as soon as no view of it is held: a read from it notices at once, and every cached
    pool is checked at most every ``liveness_interval`` seconds, on a read or on ``stats()``.
    ``cross_device`` says what a read with a stream on another GPU than the pool's does: ``"auto"`` maps
    the pool for that GPU where the two reach each other, else copies the frame once; ``"peer"``,
    ``"copy"`` and ``"refuse"`` (``DeviceMismatchError``) pick one (see :mod:`..memory.cross_device`).

    An import (connect and handout) takes at most ``connect_timeout`` seconds; a pool or socket that failed
    to import is not tried again for ``retry_after`` seconds (its descriptors fail at once, counted in
    ``unavailable``), so forged descriptors cost a subscriber one bounded wait each, not one per message.
    A publisher in another pid namespace (a container) is read like any other: its socket's name states its pid
    namespace, and the process serving it is held to that (:mod:`.peer_identity`).  ``check_publisher_pid=False``
    skips the checks that a descriptor's publisher pid is running and is the process serving its socket.

    Imports are cached per pool *instance* (:attr:`Descriptor.instance`: pool id, socket, publisher pid), never by
    pool id alone, which every descriptor on DDS makes public: a descriptor is served only from the instance it
    names, and one whose claims about it disagree is refused (:class:`PoolIdentityError`, counted in
    ``identity_mismatches``).  Two live instances claiming one pool id are each read as themselves (counted in
    ``pool_id_conflicts``, said once): a same-user process can publish frames of its own, never under another's.
    """

    def __init__(self, allowed_uids: Iterable[int] | None = None, max_pools: int = 16,
                 connect_timeout: float = 0.5, liveness_interval: float = 1.0,
                 cross_device: CrossDevice = "auto", retry_after: float = 1.0,
                 check_publisher_pid: bool = True) -> None:
        self.cross_device = check_cross_device(cross_device)
        self._cross_paths_said: set[tuple[bytes, int, str]] = set()
        self.allowed_uids = frozenset(allowed_uids or ())
        self.max_pools = max_pools
        self.connect_timeout = connect_timeout
        self.liveness_interval = liveness_interval
        self.check_publisher_pid = check_publisher_pid
        self._failed = FailureCache(retry_after)
        self._pools: OrderedDict[InstanceKey, ImportedPool] = OrderedDict()
        self._imported: weakref.WeakSet[ImportedPool] = weakref.WeakSet()  # cached or kept by handles and views
        self._next_liveness_check = 0.0
        self._last_pool: ImportedPool | None = None  # most recently used: no reordering needed
        self._lock = threading.RLock()  # the cache, for multi-threaded executors; leases have their own lock
        self.counters = Counters("reads", "stale_drops", "invalid_descriptors", "identity_mismatches", "unavailable",
                                 "imports", "same_process_reads", "evictions", "peer_reads", "copied_reads",
                                 "pool_id_conflicts", "gpu_waits")

    def read(self, core: Any, stream: StreamLike = None) -> ReadHandle:
        """Lease the block ``core`` describes and order ``stream`` after the producer's writes.

        Raises :class:`StaleDescriptorError` if the block moved on, :class:`InvalidDescriptorError` for a
        descriptor that does not fit its pool, :class:`PoolUnavailableError` if the pool is gone.
        """
        try:
            # A Descriptor is checked already: made by from_message, or by a direct channel from bounded fields.
            desc = core if type(core) is Descriptor else Descriptor.from_message(core)
            handle_stream = stream_handle(stream)
            if time.monotonic() >= self._next_liveness_check:
                self._drop_dead_pools()
            pool = self._pool_for(desc)
            pool.check(desc)
            pool.lease(desc)
            try:  # whatever fails from here on, the lease goes back before the error leaves
                # Checked under the lease: a publisher alive now was alive when we took it, so it was not
                # writing the block then (its write lock would have refused us) and cannot start now.
                if not pool.same_process and not pool.publisher_alive():
                    self._forget(pool.instance)
                    raise PoolUnavailableError(f"the publisher of {pool.name} is gone; no new reads from it")
                device = pool.memory.consumer_device(handle_stream) if desc.memory == MEMORY_CUDA else pool.header.device
                ready = pool.memory.wait_ready(desc, handle_stream)
                if not ready:  # the producer's work was still running: the consumer's stream waits on the GPU
                    self.counters.add("gpu_waits")
                if device == pool.header.device:
                    handle = ReadHandle(pool, desc, handle_stream, ready)
                else:
                    handle = self._read_across(pool, desc, handle_stream, device, ready)
            except BaseException:  # a copy that went ahead gave the lease to the releaser already: it does not raise
                pool.release(desc.block_id)
                raise
        except StaleDescriptorError:
            self.counters.add("stale_drops")
            raise
        except InvalidDescriptorError as exc:
            self.counters.add("identity_mismatches" if isinstance(exc, PoolIdentityError) else "invalid_descriptors")
            raise
        except PoolUnavailableError:
            self.counters.add("unavailable")
            raise
        self.counters.add("reads")
        if pool.same_process:
            self.counters.add("same_process_reads")
        return handle

    def _read_across(self, pool: ImportedPool, desc: Descriptor, stream: int, device: int, ready: bool) -> ReadHandle:
        """A read whose stream is on ``device``, not the pool's: through a peer mapping, or one copy on ``device``.

        The consumer's stream already waits for the producer; a copy runs on it after that wait.
        """
        path = choose_path(self.cross_device, pool.header.device, device)
        self._say_path_once(pool, device, path)
        if path == "peer":
            pool.memory.grant_peer(device)
            self.counters.add("peer_reads")
            return ReadHandle(pool, desc, stream, ready, PeerMapping(pool.memory, device))
        start = desc.block_id * pool.header.block_size
        copy = copy_to_device(pool.memory, start, desc.byte_size, stream, device)  # the lease is still ours if it raises
        # Nothing below raises: the lease now goes back once the copy has run, the copy once the consumer is done.
        copy.release_source_after(stream, lambda: pool.release(desc.block_id))
        self.counters.add("copied_reads")
        return ReadHandle(pool, desc, stream, False, copy)

    def _say_path_once(self, pool: ImportedPool, device: int, path: str) -> None:
        key = (pool.header.pool_id, device, path)
        if key not in self._cross_paths_said:
            self._cross_paths_said.add(key)
            how = ("a peer mapping: read in place, no copy" if path == "peer"
                   else "one device-to-device copy per frame into a reader-side block")
            log.info("%s lives on CUDA device %d; streams on device %d read it through %s (cross_device=%r)",
                     pool.name, pool.header.device, device, how, self.cross_device)

    def _pool_for(self, desc: Descriptor) -> ImportedPool:
        pool = self._last_pool  # the common case, without the lock: the instance read last time
        if (pool is not None and pool.pool_id == desc.pool_id and pool.socket_path == desc.socket_path
                and pool.publisher_pid == desc.publisher_pid and not pool.retired):
            return pool
        with self._lock:
            pool = self._pool_for_locked(desc)
            self._last_pool = pool
            return pool

    def _pool_for_locked(self, desc: Descriptor) -> ImportedPool:
        key = desc.instance
        pool = self._pools.get(key)
        if pool is not None:
            if not pool.retired:
                self._pools.move_to_end(key)
                return pool
            self._forget(key)  # closed here (its same-process publisher closed): import afresh or fail
        pool = self._same_process_import(desc) if desc.publisher_pid == os.getpid() else None
        if pool is None:
            pool = self._import(desc)
        self.counters.add("imports")
        self._say_conflicts(pool)
        self._pools[key] = pool
        self._imported.add(pool)
        self._evict()
        return pool

    @staticmethod
    def _same_process_import(desc: Descriptor) -> ImportedPool | None:
        """This process's own pool the descriptor names, imported as a reader; None if it names none of ours."""
        local = local_pools.get(desc.pool_id)
        if local is None:
            return None
        if local.socket_path != desc.socket_path:
            raise PoolIdentityError(f"{desc.pool_name}: this process's pool {desc.pool_id.hex()[:8]} is served at "
                                    f"{local.socket_path!r}, not at the descriptor's socket")
        return local.same_process_import()

    def _say_conflicts(self, pool: ImportedPool) -> None:
        """Count (and say once) another live instance that claims the same pool id: each is read as itself."""
        others = [other for other in self._pools.values() if other.pool_id == pool.pool_id and not other.retired]
        if others:
            self.counters.add("pool_id_conflicts")
            log.warning("%s claims the pool id of %s too: each is read as its own pool, neither from the other's "
                        "memory (a same-user process reusing a public pool id?)", pool.name,
                        ", ".join(other.name for other in others))

    def _import(self, desc: Descriptor) -> ImportedPool:
        """Import another process's pool, unless it (or its socket) failed lately; remember a failure."""
        owner = check_socket_name(desc)  # the descriptor's own claims: free to check, never remembered
        self._failed.check(desc.socket_path, desc.pool_name)
        try:
            if self.check_publisher_pid:
                check_publisher_alive(desc, owner)
            header, fds, verified = fetch_pool_fds(desc, self.allowed_uids, self.connect_timeout,
                                                   owner if self.check_publisher_pid else None)
            if not owner.in_this_pid_namespace:  # once per import: a publisher in a container, and how it was known
                log.info("%s: its publisher lives in another pid namespace: %s", desc.pool_name, verified)
            try:
                if header.memory == MEMORY_CUDA:  # what the pool says, not the descriptor: a forged 'cuda' decides nothing
                    require_cuda(header.device)  # here, not per read: a cached CUDA pool proves CUDA works
                return ImportedPool(header, fds[0], fds[1], desc.socket_path)
            except OSError as exc:
                raise PoolUnavailableError(f"{desc.pool_name}: could not map or lock it: {exc}") from exc
            finally:
                close_fds(fds)
        except OtherPoolError:
            raise  # a live pool answered: nothing to hold against its socket
        except (InvalidDescriptorError, PoolUnavailableError, CudaUnavailableError) as exc:
            self._failed.remember(desc.socket_path, exc)
            raise

    def _evict(self) -> None:
        """Keep at most ``max_pools``: drop dead publishers' pools first, then the least recently used idle ones."""
        for key, pool in list(self._pools.items()):
            if len(self._pools) <= self.max_pools:
                return
            if not pool.same_process and not pool.publisher_alive():
                self._forget(key)
        for key, pool in list(self._pools.items()):
            if len(self._pools) <= self.max_pools:
                return
            if pool.leases_held == 0:
                self._forget(key)

    def _forget(self, key: InstanceKey) -> None:
        """Drop a pool from the cache; it closes at once, or once the last handle and view on it are gone."""
        with self._lock:
            pool = self._pools.pop(key, None)
        if pool is not None:
            self.counters.add("evictions")
            pool.retire()

    def _drop_dead_pools(self, check_liveness: bool = True) -> None:
        """Forget the cached pools closed in this process and, with ``check_liveness``, those whose publisher
        in another process closed or died (one system call per such pool)."""
        with self._lock:
            if check_liveness:
                self._next_liveness_check = time.monotonic() + self.liveness_interval
            for key, pool in list(self._pools.items()):
                if pool.retired or (check_liveness and not pool.same_process and not pool.publisher_alive()):
                    self._forget(key)

    def stats(self) -> dict[str, int]:
        """Counters (reads, stale_drops, invalid_descriptors, identity_mismatches, unavailable, imports,
        same_process_reads, evictions, peer_reads, copied_reads, pool_id_conflicts, import_waits; gpu_waits: reads
        whose producer had not finished, so the consumer's stream waits on the GPU), the sockets
        backed off now (sockets_backed_off)
        and gauges (pools_cached, pools_open, leases_held); dead publishers' pools are dropped first, when due."""
        self._drop_dead_pools(check_liveness=time.monotonic() >= self._next_liveness_check)
        stats = self.counters.snapshot()
        stats.update(self._failed.stats())  # import_waits, sockets_backed_off: what forged or silent sockets cost
        with self._lock:
            imported = list(self._imported)
            stats["pools_cached"] = len(self._pools)
        stats["pools_open"] = sum(1 for pool in imported if not pool.closed)
        stats["leases_held"] = sum(pool.leases_held for pool in imported)
        return stats

    def leases_by_pool(self) -> dict[str, int]:
        """Leases this process holds now, by pool id (hex) of every pool still imported: what diagnostics report."""
        with self._lock:
            imported = list(self._imported)
        return {pool.header.pool_id.hex(): pool.leases_held for pool in imported if not pool.closed}

    def close(self) -> None:
        """Forget every pool: idle ones close at once, the others when their last handle and view are gone."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.retire()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
