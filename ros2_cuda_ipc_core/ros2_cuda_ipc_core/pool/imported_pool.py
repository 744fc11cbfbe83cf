"""A pool as a reader process sees it: header, read-only mappings, its own lease file.

An imported pool lives while it serves reads: once retired (its publisher closed or died, or
the reader's cache let it go) it takes no new lease and closes, unmapping everything and
closing its fds, as soon as no lease on it is held, at once when none is.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

from ..errors import InvalidDescriptorError, PoolUnavailableError, StaleDescriptorError
from ..memory.host_memory import ImportedHostMemory
from ..memory.layout import HEADER_SIZE, MEMORY_CUDA, MEMORY_NAMES, Metadata, PoolHeader
from ..memory.memfd import check_sealed, map_fd
from .fork_safety import close_in_forked_children
from .leases import FIRST_BLOCK_LEASE, LIVENESS_LEASE, LeaseFile, reopen

log = logging.getLogger("ros2_cuda_ipc")

if TYPE_CHECKING:
    from .descriptor import Descriptor, InstanceKey


def _close_import(memory: Any, metadata: Metadata, leases: LeaseFile) -> None:
    memory.close()
    metadata.close()
    leases.close()


class ImportedPool:
    """Mappings and leases of one pool in this process.  Lease counts are per process: one lock per block.

    ``local_memory`` is the pool's own memory when its publisher lives in this process (the
    same-process path); the import then maps it again, read-only, rather than through ``memory_fd``.
    """

    def __init__(self, header: PoolHeader, metadata_fd: int, memory_fd: int, socket_path: str,
                 local_memory: Any = None) -> None:
        self.header = header
        self.pool_id = header.pool_id
        self.socket_path = socket_path
        self.publisher_pid = header.publisher_pid
        self.same_process = local_memory is not None
        self.name = f"pool {header.pool_id.hex()[:8]} at {socket_path!r}"
        check_sealed(metadata_fd, header.metadata_size, f"the metadata of {self.name}")
        metadata_map = map_fd(metadata_fd, header.metadata_size, writable=False)
        if PoolHeader.unpack(metadata_map[:HEADER_SIZE]) != header:
            metadata_map.close()
            raise InvalidDescriptorError(f"{self.name}: its metadata disagrees with the header it sent")
        self.metadata = Metadata(metadata_map, header)
        try:
            self.leases = LeaseFile(reopen(metadata_fd))
        except BaseException:
            self.metadata.close()
            raise
        try:
            if header.memory == MEMORY_CUDA:
                from ..memory.cuda_memory import import_cuda_memory

                self.memory: Any = import_cuda_memory(header, memory_fd, local_memory, metadata_fd)
            else:
                self.memory = ImportedHostMemory(memory_fd, header.block_count, header.block_size)
        except BaseException:
            self.leases.close()
            self.metadata.close()
            raise
        self._finalizer = weakref.finalize(self, _close_import, self.memory, self.metadata, self.leases)
        self._counts = [0] * header.block_count
        self._retired = False
        # Re-entrant: a handle or view caught in a reference cycle gives its share back from the garbage
        # collector, which may run inside a section holding this lock.
        self._lock = threading.RLock()
        close_in_forked_children(self)

    @property
    def instance(self) -> InstanceKey:
        """(pool_id, socket_path, publisher_pid): the one pool instance this import is (see ``Descriptor.instance``)."""
        return (self.pool_id, self.socket_path, self.publisher_pid)

    def check(self, desc: Descriptor) -> None:
        """Refuse a descriptor that does not fit this pool, before any lease is taken."""
        header = self.header
        if desc.block_id >= header.block_count:
            raise InvalidDescriptorError(f"block_id {desc.block_id} is beyond {self.name}'s {header.block_count} blocks")
        if not 0 < desc.byte_size <= header.block_size:
            raise InvalidDescriptorError(f"byte_size {desc.byte_size} does not fit {self.name}'s "
                                         f"{header.block_size}-byte blocks")
        if desc.memory != header.memory:
            raise InvalidDescriptorError(f"descriptor says {MEMORY_NAMES.get(desc.memory, desc.memory)} memory, "
                                         f"{self.name} holds {MEMORY_NAMES[header.memory]}")
        if desc.device_id != header.device:
            raise InvalidDescriptorError(f"descriptor names device {desc.device_id}, {self.name} is on {header.device}")

    def publisher_alive(self) -> bool:
        """The publisher holds the pool's liveness lock for as long as the pool is open (one system call)."""
        return self.leases.held_by_others(LIVENESS_LEASE)

    def lease(self, desc: Descriptor) -> None:
        """Take (or share) this process's read lease on the block, and check it still holds ``desc``'s frame."""
        block = desc.block_id
        with self._lock:
            if self._retired:
                raise PoolUnavailableError(f"{self.name} was closed in this process: its publisher closed or died")
            if self._counts[block] == 0 and not self.leases.try_read(FIRST_BLOCK_LEASE + block):
                raise StaleDescriptorError(f"block {block} of {self.name} is being rewritten; the frame is gone")
            self._counts[block] += 1
            current = self.metadata.uid(block)
        if current != desc.uid:
            self.release(block)
            raise StaleDescriptorError(f"block {block} of {self.name} now holds publication {current}, "
                                       f"not {desc.uid}: the reader fell behind; drop this message")

    def release_after(self, block: int, stream: int, via: Any = None) -> None:
        """Give the lease back once the consumer's queued work on ``stream`` is done (at once for host memory).

        ``via``: the mapping the views were read through when not :attr:`memory` itself (another GPU's view of it).
        """
        try:
            (self.memory if via is None else via).release_after(stream, lambda: self.release(block))
        except Exception as exc:  # never keep a block pinned because the release path failed
            if not (isinstance(exc, RuntimeError) and (sys.is_finalizing() or "interpreter shutdown" in str(exc))):
                log.exception("%s: ordered release of block %d failed; releasing at once", self.name, block)
            # (a handle closed as the interpreter exits gets no thread to wait on its stream: the process is done)
            self.release(block)

    def release(self, block: int) -> None:
        """Give back one share of the block's lease; the last share of a retired pool closes it."""
        with self._lock:
            self._counts[block] -= 1
            if self._counts[block] == 0:
                self.leases.release(FIRST_BLOCK_LEASE + block)
            close_now = self._retired and not any(self._counts)
        if close_now:
            self._finalizer()

    def retire(self) -> None:
        """No new leases from here on; close as soon as no lease is held (at once when none is)."""
        with self._lock:
            self._retired = True
            close_now = not any(self._counts)
        if close_now:
            self._finalizer()

    def _close_in_child(self) -> None:
        """After ``fork()``: no lease of the parent's outlives it through the child; the child reads nothing more."""
        self._retired = True
        self.leases.close()

    @property
    def retired(self) -> bool:
        return self._retired

    @property
    def closed(self) -> bool:
        """Whether this import's mappings and fds are given back."""
        return not self._finalizer.alive

    @property
    def leases_held(self) -> int:
        return sum(1 for count in self._counts if count)


def close_fds(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
