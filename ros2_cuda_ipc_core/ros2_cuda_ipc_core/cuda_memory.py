"""CUDA memory classes: a publisher's exportable blocks with their ready events, and a reader's import.

Publisher: ``cuMemCreate`` with the POSIX-fd handle type, mapped read-write, exported once as an
fd that the pool's FD server hands out; one interprocess event per block, recorded on the
producer's stream at publish.  Reader: ``cuMemImportFromShareableHandle``, mapped read-only where
the driver allows it, IPC events opened once per block; a read enqueues ``cuStreamWaitEvent`` on
the consumer's stream and never blocks the host; a release hands the lease to the releaser.
The driver calls themselves live in ``cuda_context``, ``cuda_vmm`` and ``cuda_releaser``.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .collected import when_collected
from .cuda_array import CudaArray
from .cuda_context import context_for, driver, on_device
from .cuda_driver import device_count, driver_call, require_cuda
from .cuda_releaser import releaser
from .cuda_vmm import (
    allocation_prop,
    event_handle_bytes,
    grant_read_access,
    granularity,
    map_memory,
    open_event_handle,
    stream_device,
    unmap_memory,
    wait_unless_done,
)
from .errors import CudaDriverError, InvalidDescriptorError, Ros2CudaIpcError
from .layout import MEMORY_CUDA, PoolHeader
from .streams import StreamLike, stream_handle
from .views import check_layout

if TYPE_CHECKING:
    from .descriptor import Descriptor


def _free_cuda(device: int, handle: Any, events: list[Any], mapping: tuple[int, int]) -> None:
    """Give a publisher's allocation back: wait for the work published on it, then events, mapping, handle."""
    cu = driver()
    with on_device(device):
        for event in events:
            cu.cuEventSynchronize(event)  # the last publication's writes may still be queued
            cu.cuEventDestroy(event)
        unmap_memory(*mapping)
        cu.cuMemRelease(handle)  # readers' imports keep the physical memory alive


def _free_import(device: int, events: dict[int, tuple[bytes, Any]], mapping: tuple[int, int],
                 local: CudaMemory | None) -> None:
    """Give a reader's mapping back (its leases, and so its consumers' work, are already done)."""
    with on_device(device):
        for _, event in events.values():
            driver().cuEventDestroy(event)
        unmap_memory(*mapping)
    if local is not None:
        local.drop()


class _CudaBlocks:
    """Address arithmetic, views and lifetime shared by the publisher's and the readers' mappings.

    The memory goes back to the driver when it is closed and nothing uses it any more: at once
    when no view is alive, else when the last view (or the last DLPack tensor made from one) goes.
    """

    kind = MEMORY_CUDA
    base_address: int
    size: int
    device: int
    readonly: bool
    _finalizer: weakref.finalize

    def _start_lifetime(self) -> None:
        self._users = 0
        self._closing = False
        self._lifetime_lock = threading.Lock()

    def retain(self) -> None:
        """Count one more user (a view, a same-process import) that keeps the memory past close()."""
        with self._lifetime_lock:  # nothing that allocates in here: the GC could run drop() on this thread
            alive = self._finalizer.alive
            if alive:
                self._users += 1
        if not alive:
            raise Ros2CudaIpcError("this CUDA memory was already given back to the driver")

    def drop(self) -> None:
        """One user fewer; the last one out of a closed memory gives it back."""
        with self._lifetime_lock:
            self._users -= 1
            free = self._closing and self._users == 0
        if free:
            self._finalizer()

    def close(self) -> None:
        """Give the memory back now if nothing uses it, else as soon as the last user lets go."""
        with self._lifetime_lock:
            self._closing = True
            free = self._users == 0
        if free:
            self._finalizer()

    @property
    def freed(self) -> bool:
        return not self._finalizer.alive

    def address(self, offset: int) -> int:
        return self.base_address + offset

    def view(self, start: int, limit: int, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None,
             offset: int = 0, ready: bool = False, ordered_stream: int | None = None,
             device: int | None = None) -> CudaArray:
        """A view of ``[start, start + limit)``.  A reader's view orders a consumer's stream after the producer
        on export, unless the producer's writes had finished when it was read (``ready``) or the consumer
        uses ``ordered_stream``, the stream the read already ordered.  ``device``: where the view is read
        from when that is not the memory's own device (a peer mapping)."""
        dtype = np.dtype(dtype)
        shape, strides = check_layout(shape, strides, dtype.itemsize, offset, limit)
        order_on = None if ready else self._order_after(start, ordered_stream)
        array = CudaArray(self.base_address + start + offset, shape, strides, dtype,
                          self.device if device is None else device, self.readonly, self, order_on)
        self.retain()
        when_collected(array, self.drop)
        return array

    def _order_after(self, start: int, ordered_stream: int | None) -> Callable[[int], None] | None:
        return None


class CudaMemory(_CudaBlocks):
    """The publisher's blocks: one exportable VMM allocation, one interprocess ready event per block."""

    readonly = False

    def __init__(self, byte_size: int, block_count: int, device: int) -> None:
        with on_device(device):
            self._allocate(byte_size, block_count, device)

    def _allocate(self, byte_size: int, block_count: int, device: int) -> None:
        cu = driver()
        self._start_lifetime()
        self.device = device
        step = granularity(device)
        block_size = -(-byte_size // step) * step
        self.size = block_size * block_count
        self.fd = -1
        self._handle = driver_call(cu.cuMemCreate, self.size, allocation_prop(device), 0)
        self._events: list[Any] = []
        try:
            self.base_address, _ = map_memory(self._handle, self.size, device, read_only=False)
        except BaseException:
            cu.cuMemRelease(self._handle)
            raise
        # Mapping, handle and events go at close() once no view or same-process import uses them (or with this object).
        self._finalizer = weakref.finalize(self, _free_cuda, device, self._handle, self._events,
                                           (self.base_address, self.size))
        try:
            pos_fd = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            self.fd = int(driver_call(cu.cuMemExportToShareableHandle, self._handle, pos_fd, 0))
            flags = cu.CUevent_flags.CU_EVENT_INTERPROCESS | cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
            for _ in range(block_count):
                self._events.append(driver_call(cu.cuEventCreate, flags))
            self._event_handles = [np.frombuffer(event_handle_bytes(e), dtype=np.uint8) for e in self._events]
        except BaseException:
            self.close()
            raise

    def record_ready(self, block_id: int, stream: StreamLike) -> np.ndarray:
        """Record block ``block_id``'s ready event on the producer's ``stream``; its IPC handle goes in the descriptor."""
        handle = stream_handle(stream)
        with context_for(handle, self.device):
            driver_call(driver().cuEventRecord, self._events[block_id], handle)
        return self._event_handles[block_id]

    def ready_event(self, block_id: int) -> Any:
        return self._events[block_id]

    @property
    def handle(self) -> Any:
        """The allocation's ``CUmemGenericAllocationHandle``, for a same-process import to map."""
        return self._handle

    def close(self) -> None:
        """Stop exporting; give the memory back once no view or same-process import uses it."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        super().close()


class ImportedCudaMemory(_CudaBlocks):
    """A reader's mapping of a pool's blocks (read-only where the driver allows), and its ready events."""

    def __init__(self, header: PoolHeader, fd: int, local: CudaMemory | None) -> None:
        with on_device(header.device):
            self._import(header, fd, local)

    def _import(self, header: PoolHeader, fd: int, local: CudaMemory | None) -> None:
        cu = driver()
        self._start_lifetime()
        self.device = header.device
        self.size = header.block_count * header.block_size
        self._block_size = header.block_size
        self._local = local
        if local is not None:  # same process: map the pool's own allocation again, read-only
            self.base_address, enforced = map_memory(local.handle, self.size, self.device, read_only=True)
        else:
            pos_fd = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            try:
                handle = driver_call(cu.cuMemImportFromShareableHandle, fd, pos_fd)
            except CudaDriverError as exc:
                raise InvalidDescriptorError(f"the pool's block memory could not be imported: {exc}") from None
            try:
                self.base_address, enforced = map_memory(handle, self.size, self.device, read_only=True)
            finally:
                cu.cuMemRelease(handle)  # the mapping holds the memory from here on
        self.readonly = True
        self.readonly_enforced = enforced
        self._events: dict[int, tuple[bytes, Any]] = {}
        self._peers: set[int] = set()  # devices granted read access to this mapping (cross-device reads)
        if local is not None:
            try:
                local.retain()  # the pool's events and allocation serve this import until it closes
            except BaseException:
                unmap_memory(self.base_address, self.size)
                raise
        self._finalizer = weakref.finalize(self, _free_import, self.device, self._events,
                                           (self.base_address, self.size), local)

    def _ready_event(self, block_id: int, handle: bytes) -> Any:
        if self._local is not None:
            return self._local.ready_event(block_id)
        cached = self._events.get(block_id)
        if cached is not None and cached[0] == handle:
            return cached[1]
        try:
            with on_device(self.device):
                event = open_event_handle(handle)
        except CudaDriverError as exc:
            raise InvalidDescriptorError(f"event_handle of block {block_id} does not open: {exc}") from None
        if cached is not None:
            with on_device(self.device):
                driver().cuEventDestroy(cached[1])
        self._events[block_id] = (handle, event)
        return event

    @property
    def block_size(self) -> int:
        return self._block_size

    def consumer_device(self, stream: int) -> int:
        """The device ``stream`` runs on: this memory's own for the default streams, and on a one-GPU machine
        without asking the driver (a call of 25 us cold, per frame)."""
        if device_count() > 1:
            device = stream_device(stream)
            if device is not None:
                return device
        return self.device

    def wait_ready(self, desc: Descriptor, stream: int) -> bool:
        """Make ``stream`` wait for the producer's writes to the block; the host does not wait.

        Returns whether those writes had finished already (then no consumer stream needs to wait).
        ``stream`` may be on another device (cross-device reads): a stream can wait on any device's event.
        """
        event = self._ready_event(desc.block_id, desc.event_handle)
        with context_for(stream, self.device):
            return wait_unless_done(stream, event)

    def grant_peer(self, device: int) -> None:
        """Let kernels on ``device`` read this mapping in place (once per device)."""
        if device not in self._peers:
            with on_device(self.device):
                grant_read_access(self.base_address, self.size, device)
            self._peers.add(device)

    def _order_after(self, start: int, ordered_stream: int | None) -> Callable[[int], None]:
        block_id = start // self._block_size

        def order_on(stream: int) -> None:
            if stream == ordered_stream:
                return  # read() made this very stream wait already
            event = self._local.ready_event(block_id) if self._local is not None else self._events[block_id][1]
            with context_for(stream, self.device):
                wait_unless_done(stream, event)

        return order_on

    def release_after(self, stream: int, release: Callable[[], None]) -> None:
        """Drop the lease once the consumer's work queued on ``stream`` so far has finished."""
        releaser().release_after(self.device, stream, release)


def import_cuda_memory(header: PoolHeader, fd: int, local: CudaMemory | None) -> ImportedCudaMemory:
    """A reader's mapping of a pool: from ``fd``, or from ``local``, the pool's own memory in this process."""
    require_cuda(header.device)
    return ImportedCudaMemory(header, fd, local)
