"""The pool's metadata memfd: a header, then one record per block.

Both sides map the same bytes, so this module is the single definition of
that layout.  The header is also what the FD server sends first, so a reader
can check it before it maps anything.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

from ..errors import InvalidDescriptorError

MAGIC = b"R2CIPC\x00\x01"
LAYOUT_VERSION = 3  # 2: the header names its publisher (pid); 3: how readiness is signalled, and timeline slots
MEMORY_HOST = 0
MEMORY_CUDA = 1
MEMORY_NAMES = {MEMORY_HOST: "host", MEMORY_CUDA: "cuda"}
#: How a CUDA pool says a block's writes are done: an interprocess event per block (its handle in the descriptor),
#: or the block's timeline slot in this memfd reaching the publication's uid (:mod:`.cuda_timeline`).
SYNC_EVENTS = 0
SYNC_TIMELINE = 1
SYNC_NAMES = {SYNC_EVENTS: "interprocess events", SYNC_TIMELINE: "timeline values"}

#: Upper bounds that keep a hostile header from asking for absurd mappings.
MAX_BLOCK_COUNT = 4096
MAX_BLOCK_SIZE = 1 << 40

#: magic, version, pool_id, memory, sync, device, block_count, block_size, publisher pid (as its own pid namespace
#: numbers it)
_HEADER = struct.Struct("<8sI16sBB2xIIQI4x")
_RECORD = struct.Struct("<QQQ")  # uid, published_ns (CLOCK_MONOTONIC), byte_size
HEADER_SIZE = _HEADER.size

#: The lease locks on the metadata memfd (the liveness lease and one per block) are defined in ``leases``.


@dataclass(frozen=True)
class PoolHeader:
    """What every process must agree on about a pool."""

    pool_id: bytes
    memory: int
    device: int
    block_count: int
    block_size: int
    publisher_pid: int  #: the process that made the pool; what its socket's name and its descriptors must say
    sync: int = SYNC_EVENTS  #: how readiness is signalled (CUDA pools)

    def pack(self) -> bytes:
        return _HEADER.pack(MAGIC, LAYOUT_VERSION, self.pool_id, self.memory, self.sync, self.device,
                            self.block_count, self.block_size, self.publisher_pid)

    @classmethod
    def unpack(cls, data: bytes) -> PoolHeader:
        """Parse and sanity-check a header from a peer; raise InvalidDescriptorError if it is not ours."""
        if len(data) < _HEADER.size:
            raise InvalidDescriptorError(f"pool header is {len(data)} bytes, expected {_HEADER.size}")
        magic, version, pool_id, memory, sync, device, count, size, publisher_pid = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise InvalidDescriptorError(f"not a ros2_cuda_ipc pool (magic {magic!r})")
        if version != LAYOUT_VERSION:
            raise InvalidDescriptorError(f"pool layout version {version}, this reader knows {LAYOUT_VERSION}: "
                                         "update ros2_cuda_ipc on one side")
        if memory not in MEMORY_NAMES:
            raise InvalidDescriptorError(f"pool header names unknown memory kind {memory}")
        if sync not in SYNC_NAMES:
            raise InvalidDescriptorError(f"pool header names unknown readiness signal {sync}")
        if not 0 < count <= MAX_BLOCK_COUNT or not 0 < size <= MAX_BLOCK_SIZE:
            raise InvalidDescriptorError(f"pool header has {count} blocks of {size} bytes: out of range")
        return cls(pool_id, memory, device, count, size, publisher_pid, sync)

    @property
    def timeline_offset(self) -> int:
        """Where the blocks' 8-byte timeline slots start in the metadata memfd (8-byte aligned)."""
        return _HEADER.size + self.block_count * _RECORD.size

    @property
    def metadata_size(self) -> int:
        """Bytes of the metadata memfd (header, records, timeline slots), rounded up to whole pages."""
        raw = self.timeline_offset + self.block_count * 8
        return -(-raw // mmap.PAGESIZE) * mmap.PAGESIZE


@dataclass(frozen=True)
class BlockRecord:
    uid: int
    published_ns: int
    byte_size: int


class Metadata:
    """A mapping of the metadata memfd: the header and the per-block records."""

    def __init__(self, mapping: mmap.mmap, header: PoolHeader) -> None:
        self._map = mapping
        self.header = header

    def uid(self, block_id: int) -> int:
        return _RECORD.unpack_from(self._map, _HEADER.size + block_id * _RECORD.size)[0]

    def write_record(self, block_id: int, record: BlockRecord) -> None:
        _RECORD.pack_into(self._map, _HEADER.size + block_id * _RECORD.size,
                          record.uid, record.published_ns, record.byte_size)

    def write_header(self) -> None:
        self._map[: _HEADER.size] = self.header.pack()

    def close(self) -> None:
        self._map.close()
