"""CUDA blocks: one exportable VMM allocation per pool, ready events per block, stream-ordered reads.

Publisher: ``cuMemCreate`` with the POSIX-fd handle type, mapped read-write, exported once as an
fd that the pool's FD server hands out; one interprocess event per block, recorded on the
producer's stream at publish.  Reader: ``cuMemImportFromShareableHandle``, mapped read-only where
the driver allows it, IPC events opened once per block; a read enqueues ``cuStreamWaitEvent`` on
the consumer's stream and never blocks the host; a release records a completion event and a
worker thread drops the lease once it has fired.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .cuda_array import CudaArray
from .cuda_driver import check, require_cuda
from .errors import CudaUnavailableError, DeviceMismatchError, InvalidDescriptorError
from .layout import MEMORY_CUDA, PoolHeader
from .streams import StreamLike, stream_handle

if TYPE_CHECKING:
    from .descriptor import Descriptor
    from .pool import BlockManager

log = logging.getLogger("ros2_cuda_ipc")


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


@functools.cache
def primary_context(device: int) -> Any:
    """The device's primary context (the one torch, cupy and cuda.core use), retained for the process."""
    require_cuda(device)
    cu = _driver()
    return check(cu.cuDevicePrimaryCtxRetain(check(cu.cuDeviceGet(device))))


@contextlib.contextmanager
def on_device(device: int) -> Iterator[None]:
    """Run driver calls in ``device``'s primary context and leave the caller's current context as it was
    (torch and cupy follow the thread's current context: reading from GPU 1 must not switch them to it)."""
    cu = _driver()
    ctx = primary_context(device)
    current = int(check(cu.cuCtxGetCurrent()))
    if current == int(ctx):
        yield
        return
    if current == 0 and device == 0:  # what the runtime would make current itself: keep it, skip push/pop
        check(cu.cuCtxSetCurrent(ctx))
        yield
        return
    check(cu.cuCtxPushCurrent(ctx))
    try:
        yield
    finally:
        cu.cuCtxPopCurrent()


def make_current(device: int) -> None:
    """For threads of our own only: make ``device``'s primary context current and leave it so."""
    cu = _driver()
    ctx = primary_context(device)
    if int(check(cu.cuCtxGetCurrent())) != int(ctx):
        check(cu.cuCtxSetCurrent(ctx))


def _allocation_prop(device: int) -> Any:
    cu = _driver()
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    return prop


@functools.cache
def granularity(device: int) -> int:
    """VMM allocation granularity of ``device`` (2 MiB on current GPUs)."""
    cu = _driver()
    flag = cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    return int(check(cu.cuMemGetAllocationGranularity(_allocation_prop(device), flag)))


def _map(handle: Any, size: int, device: int, read_only: bool) -> tuple[int, bool]:
    """Reserve, map and grant access; returns (address, whether read-only is enforced by the driver)."""
    cu = _driver()
    ptr = check(cu.cuMemAddressReserve(size, granularity(device), 0, 0))
    try:
        check(cu.cuMemMap(ptr, size, 0, handle, 0))
    except BaseException:
        cu.cuMemAddressFree(ptr, size)
        raise
    access = cu.CUmemAccessDesc()
    access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    enforced = False
    if read_only:
        access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ
        enforced = int(cu.cuMemSetAccess(ptr, size, [access], 1)[0]) == 0
        if not enforced:
            log.info("CUDA device %d cannot map read-only; reader views are flagged read-only instead", device)
    if not enforced:
        access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        try:
            check(cu.cuMemSetAccess(ptr, size, [access], 1))
        except BaseException:
            _unmap(int(ptr), size)
            raise
    return int(ptr), enforced


def _unmap(ptr: int, size: int) -> None:
    cu = _driver()
    cu.cuMemUnmap(ptr, size)
    cu.cuMemAddressFree(ptr, size)


def event_handle_bytes(event: Any) -> bytes:
    handle = check(_driver().cuIpcGetEventHandle(event))
    return ctypes.string_at(int(handle.getPtr()), 64)


def open_event_handle(data: bytes) -> Any:
    cu = _driver()
    handle = cu.CUipcEventHandle()
    ctypes.memmove(int(handle.getPtr()), data, 64)
    return check(cu.cuIpcOpenEventHandle(handle))


def _wait_unless_done(stream: int, event: Any) -> None:
    """Order ``stream`` after ``event``; an event that has already fired needs no GPU-side wait at all."""
    cu = _driver()
    if cu.cuEventQuery(event)[0] != cu.CUresult.CUDA_SUCCESS:
        check(cu.cuStreamWaitEvent(stream, event, 0))


def stream_device(stream: int) -> int | None:
    """The device a stream belongs to; None for the default streams (they follow the current context)."""
    if stream in (0, 1, 2):
        return None
    cu = _driver()
    return int(check(cu.cuStreamGetDevice(stream)))


def _free_cuda(handle: Any, events: list[Any], mapping: tuple[int, int]) -> None:
    cu = _driver()
    for event in events:
        cu.cuEventDestroy(event)
    _unmap(*mapping)
    cu.cuMemRelease(handle)  # readers' imports keep the physical memory alive


def _free_import(events: dict[int, tuple[bytes, Any]], mapping: tuple[int, int]) -> None:
    for _, event in events.values():
        _driver().cuEventDestroy(event)
    _unmap(*mapping)


class _Releaser:
    """One worker thread that drops leases once their completion events fire (the wait runs without the GIL)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[int, Any, Callable[[], None]]] = queue.SimpleQueue()
        self._free: dict[int, list[Any]] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="ros2_cuda_ipc lease releaser", daemon=True)
        self._thread.start()

    def _event(self, device: int) -> Any:
        with self._lock:
            pool = self._free.setdefault(device, [])
            if pool:
                return pool.pop()
        cu = _driver()
        return check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))

    def release_after(self, device: int, stream: int, release: Callable[[], None]) -> None:
        with on_device(device):
            event = self._event(device)
            check(_driver().cuEventRecord(event, stream))
        self._jobs.put((device, event, release))

    def _run(self) -> None:
        cu = _driver()
        while True:
            device, event, release = self._jobs.get()
            try:
                make_current(device)
                cu.cuEventSynchronize(event)  # cuda.bindings releases the GIL around driver calls
            finally:
                release()
                with self._lock:
                    self._free.setdefault(device, []).append(event)


@functools.cache
def releaser() -> _Releaser:
    return _Releaser()


class _CudaBlocks:
    """Address arithmetic and views shared by the publisher's and the readers' mappings."""

    kind = MEMORY_CUDA
    base_address: int
    size: int
    device: int
    readonly: bool

    def address(self, offset: int) -> int:
        return self.base_address + offset

    def view(self, start: int, limit: int, shape: Sequence[int], dtype: Any,
             strides: Sequence[int] | None, offset: int = 0) -> CudaArray:
        from .views import check_layout

        dtype = np.dtype(dtype)
        shape, strides = check_layout(shape, strides, dtype.itemsize, offset, limit)
        return CudaArray(self.base_address + start + offset, shape, strides, dtype, self.device, self.readonly,
                         self, self._order_after(start))

    def _order_after(self, start: int) -> Callable[[int], None] | None:
        return None


class CudaMemory(_CudaBlocks):
    """The publisher's blocks: one exportable VMM allocation, one interprocess ready event per block."""

    readonly = False

    def __init__(self, byte_size: int, block_count: int, device: int) -> None:
        with on_device(device):
            self._allocate(byte_size, block_count, device)

    def _allocate(self, byte_size: int, block_count: int, device: int) -> None:
        cu = _driver()
        self.device = device
        step = granularity(device)
        block_size = -(-byte_size // step) * step
        self.size = block_size * block_count
        self.fd = -1
        self._handle = check(cu.cuMemCreate(self.size, _allocation_prop(device), 0))
        self._events: list[Any] = []
        try:
            self.base_address, _ = _map(self._handle, self.size, device, read_only=False)
        except BaseException:
            cu.cuMemRelease(self._handle)
            raise
        # Mapping, handle and events go when the last view (or same-process reader) lets go of this object.
        self._finalizer = weakref.finalize(self, _free_cuda, self._handle, self._events, (self.base_address, self.size))
        try:
            pos_fd = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            self.fd = int(check(cu.cuMemExportToShareableHandle(self._handle, pos_fd, 0)))
            flags = cu.CUevent_flags.CU_EVENT_INTERPROCESS | cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
            for _ in range(block_count):
                self._events.append(check(cu.cuEventCreate(flags)))
            self._event_handles = [np.frombuffer(event_handle_bytes(e), dtype=np.uint8) for e in self._events]
        except BaseException:
            self.close()
            self._finalizer()
            raise

    def record_ready(self, block_id: int, stream: StreamLike) -> np.ndarray:
        """Record block ``block_id``'s ready event on the producer's ``stream``; its IPC handle goes in the descriptor."""
        with on_device(self.device):
            check(_driver().cuEventRecord(self._events[block_id], stream_handle(stream)))
        return self._event_handles[block_id]

    def ready_event(self, block_id: int) -> Any:
        return self._events[block_id]

    def close(self) -> None:
        """Stop exporting; the mapping stays until this process's last view of it is gone."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ImportedCudaMemory(_CudaBlocks):
    """A reader's mapping of a pool's blocks (read-only where the driver allows), and its ready events."""

    def __init__(self, header: PoolHeader, fd: int, local: CudaMemory | None) -> None:
        with on_device(header.device):
            self._import(header, fd, local)

    def _import(self, header: PoolHeader, fd: int, local: CudaMemory | None) -> None:
        cu = _driver()
        self.device = header.device
        self.size = header.block_count * header.block_size
        self._block_size = header.block_size
        self._local = local
        if local is not None:  # same process: map the pool's own allocation again, read-only
            self.base_address, enforced = _map(local._handle, self.size, self.device, read_only=True)
        else:
            pos_fd = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            try:
                handle = check(cu.cuMemImportFromShareableHandle(fd, pos_fd))
            except CudaUnavailableError as exc:
                raise InvalidDescriptorError(f"the pool's block memory could not be imported: {exc}") from None
            try:
                self.base_address, enforced = _map(handle, self.size, self.device, read_only=True)
            finally:
                cu.cuMemRelease(handle)  # the mapping holds the memory from here on
        self.readonly = True
        self.readonly_enforced = enforced
        self._events: dict[int, tuple[bytes, Any]] = {}
        self._finalizer = weakref.finalize(self, _free_import, self._events, (self.base_address, self.size))

    def _ready_event(self, block_id: int, handle: bytes) -> Any:
        if self._local is not None:
            return self._local.ready_event(block_id)
        cached = self._events.get(block_id)
        if cached is not None and cached[0] == handle:
            return cached[1]
        try:
            event = open_event_handle(handle)
        except CudaUnavailableError as exc:
            raise InvalidDescriptorError(f"event_handle of block {block_id} does not open: {exc}") from None
        if cached is not None:
            _driver().cuEventDestroy(cached[1])
        self._events[block_id] = (handle, event)
        return event

    def wait_ready(self, desc: Descriptor, stream: int) -> None:
        """Make ``stream`` wait for the producer's writes to the block; the host does not wait."""
        with on_device(self.device):
            device = stream_device(stream)
            if device is not None and device != self.device:
                raise DeviceMismatchError(f"the stream is on CUDA device {device}, the block is on device "
                                          f"{self.device}: read it with a stream of the block's device")
            _wait_unless_done(stream, self._ready_event(desc.block_id, desc.event_handle))

    def _order_after(self, start: int) -> Callable[[int], None]:
        block_id = start // self._block_size

        def order_on(stream: int) -> None:
            event = self._local.ready_event(block_id) if self._local is not None else self._events[block_id][1]
            with on_device(self.device):
                _wait_unless_done(stream, event)

        return order_on

    def release_after(self, stream: int, release: Callable[[], None]) -> None:
        """Drop the lease once the consumer's work queued on ``stream`` so far has finished."""
        releaser().release_after(self.device, stream, release)



def import_cuda_memory(header: PoolHeader, fd: int, local_pool: BlockManager | None) -> ImportedCudaMemory:
    require_cuda(header.device)
    local = local_pool._memory if local_pool is not None else None
    return ImportedCudaMemory(header, fd, local)  # type: ignore[arg-type]
