"""CUDA memory classes: a publisher's exportable blocks with their readiness signals, and a reader's import.

Publisher: ``cuMemCreate`` with the POSIX-fd handle type, mapped read-write, exported once as an
fd that the pool's FD server hands out.  Readiness: the block's timeline slot in the metadata memfd,
written by the producer's stream at publish (:mod:`.cuda_timeline`), or, where the driver cannot, one
interprocess event per block recorded there (its handle in the descriptor).  Reader:
``cuMemImportFromShareableHandle``, mapped read-only where the driver allows it; a read checks the slot
(or event) on the host and otherwise enqueues a wait on the consumer's stream, never blocking the host;
a release hands the lease to the releaser.  The driver calls themselves live in ``cuda_context``,
``cuda_vmm``, ``cuda_timeline`` and ``cuda_releaser``.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from ..errors import CudaDriverError, CudaUnavailableError, InvalidDescriptorError, Ros2CudaIpcError
from .collected import when_collected
from .cuda_array import CudaArray
from .cuda_context import DEFAULT_STREAMS, context_for, driver, on_device
from .cuda_driver import device_count, driver_call, require_cuda
from .cuda_releaser import releaser
from .cuda_timeline import Timeline, close_timeline, timeline_unsupported
from .cuda_vmm import (
    allocation_prop,
    event_handle_bytes,
    grant_read_access,
    granularity,
    map_memory,
    open_event_handle,
    stream_device,
    stream_idle,
    stream_non_blocking,
    unmap_memory,
    wait_unless_done,
)
from .layout import MEMORY_CUDA, SYNC_EVENTS, SYNC_TIMELINE, PoolHeader
from .streams import StreamLike, stream_handle
from .views import check_layout

log = logging.getLogger("ros2_cuda_ipc")
#: ``events`` here makes new CUDA pools signal readiness by interprocess events, as on a driver without stream memory
#: operations (to compare the two, or to work around a driver that misbehaves).
SYNC_ENVIRONMENT = "ROS2_CUDA_IPC_SYNC"
_NO_HANDLE = np.zeros(64, dtype=np.uint8)
_MAX_KEPT = 256  # kept imports per mapping: blocks x layouts x importers
_DRAIN_SECONDS = 10.0  # how long closing a timeline pool waits for the work published on it
T = TypeVar("T")  # a timeline pool's descriptors carry no event handle


class ReadySignal(Protocol):
    """What a reader's wait needs of a publication (a pool's descriptor has it): its block, its uid (the timeline
    value the producer's stream writes) and the block's event handle (where the pool signals by events)."""

    @property
    def block_id(self) -> int: ...

    @property
    def uid(self) -> int: ...

    @property
    def event_handle(self) -> bytes: ...


def _free_cuda(device: int, handle: Any, events: list[Any], mapping: tuple[int, int], timeline: list[Any],
               signaled: list[int]) -> None:
    """Give a publisher's allocation back: wait for the work published on it (its events, or its timeline slots
    reaching the values last signalled), then events, timeline, mapping, handle.  Work that never finishes keeps
    the mapping: unmapped, a late write of the GPU's would land in freed memory.  A context the driver no longer
    lets this process enter (a sticky error) is said once here, not raised from ``close()``: what it held goes
    with it."""
    cu = driver()
    try:
        with on_device(device):
            for event in events:
                cu.cuEventSynchronize(event)  # the last publication's writes may still be queued
                cu.cuEventDestroy(event)
            if timeline[0] is not None and not timeline[0].drain(signaled, _DRAIN_SECONDS, _context_usable):
                log.warning("CUDA pool on device %d: work published on it has not finished after %g s; its memory "
                            "is left mapped rather than freed under that work", device, _DRAIN_SECONDS)
                return
            close_timeline(timeline[0])
            unmap_memory(*mapping)
            cu.cuMemRelease(handle)  # readers' imports keep the physical memory alive
    except CudaDriverError as exc:
        log.warning("CUDA pool on device %d: its context is unusable (%s); its memory goes with that context",
                    device, exc)


def _context_usable() -> bool:
    """Whether the current context can still run work: after a sticky error (a kernel's illegal address) queued
    slot writes never land, and a wait for them would only run out its time."""
    return driver().cuMemGetInfo()[0] == driver().CUresult.CUDA_SUCCESS


def _free_import(device: int, events: dict[int, tuple[bytes, Any]], mapping: tuple[int, int],
                 local: CudaMemory | None, timeline: Timeline | None) -> None:
    """Give a reader's mapping back (its leases, and so its consumers' work, are already done)."""
    with on_device(device):
        for _, event in events.values():
            driver().cuEventDestroy(event)
        close_timeline(timeline)
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
        self._kept: dict[tuple[Any, ...], Any] = {}
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
        self._kept.clear()  # kept imports hold no user count: they go with the memory
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

    def kept_import(self, array: CudaArray, importer: Callable[[Any], T]) -> T:
        """``importer`` of an array at ``array``'s address and layout that holds no lease and orders no stream,
        made once and kept until this memory closes: a reader that uses it only while its lease lasts, on the
        stream its read ordered, imports each block once rather than once a frame."""
        key = (array.ptr, array.shape, array.strides, array.dtype.str, importer)
        kept = self._kept.get(key)
        if kept is None:
            if len(self._kept) >= _MAX_KEPT:
                self._kept.clear()  # layouts and importers changing all the time: no more than a frame's import each
            kept = self._kept[key] = importer(CudaArray(array.ptr, array.shape, array.strides, array.dtype,
                                                        array.device_id, self.readonly, self))
        return kept


class CudaMemory(_CudaBlocks):
    """The publisher's blocks: one exportable VMM allocation, and per block a timeline slot (once
    :meth:`attach_timeline` registered the pool's metadata) or an interprocess ready event.

    With a timeline a publication records no event: the slot is written from the host when the producer's stream is
    idle already, else by that stream (one enqueued write).  Closing the pool waits on the host for each slot to
    reach the value last written to it."""

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
        self._timeline: list[Timeline | None] = [None]  # a box: the finalizer closes what is in it then
        self._signaled = [0] * block_count  # per block, the last value its timeline slot was told to reach
        self.sync = SYNC_EVENTS
        try:
            self.base_address, _ = map_memory(self._handle, self.size, device, read_only=False)
        except BaseException:
            cu.cuMemRelease(self._handle)
            raise
        # Mapping, handle and events go at close() once no view or same-process import uses them (or with this object).
        self._finalizer = weakref.finalize(self, _free_cuda, device, self._handle, self._events,
                                           (self.base_address, self.size), self._timeline, self._signaled)
        try:
            pos_fd = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            self.fd = int(driver_call(cu.cuMemExportToShareableHandle, self._handle, pos_fd, 0))
            self._make_events(block_count)
        except BaseException:
            self.close()
            raise

    def _make_events(self, block_count: int) -> None:
        cu = driver()
        flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING | cu.CUevent_flags.CU_EVENT_INTERPROCESS
        for _ in range(block_count):
            self._events.append(driver_call(cu.cuEventCreate, flags))
        self._event_handles = [np.frombuffer(event_handle_bytes(e), dtype=np.uint8) for e in self._events]

    def _drop_events(self) -> None:
        """A timeline pool's blocks need no event: its descriptors carry no handle."""
        cu = driver()
        for event in self._events:
            cu.cuEventDestroy(event)
        self._event_handles = [_NO_HANDLE] * len(self._events)
        self._events.clear()

    def attach_timeline(self, metadata_fd: int, header: PoolHeader) -> int:
        """Signal readiness through the pool's timeline slots where the driver can (mapping ``metadata_fd``
        writable: call it before the memfd is sealed); how the pool signals it (``SYNC_*``), said once if not
        by timeline."""
        why = ("ROS2_CUDA_IPC_SYNC=events" if os.environ.get(SYNC_ENVIRONMENT, "").strip().lower() == "events"
               else timeline_unsupported(self.device))
        if why is None:
            try:
                with on_device(self.device):
                    self._timeline[0] = Timeline(metadata_fd, header, writable=True)
                    self._drop_events()
                self.sync = SYNC_TIMELINE
                return self.sync
            except CudaDriverError as exc:
                why = f"registering its metadata failed: {exc}"
        log.warning("CUDA pool on device %d: readiness by interprocess events, not timeline values (%s); readers "
                    "need a /dev/shm shared with this process", self.device, why)
        return self.sync

    def record_ready(self, block_id: int, uid: int, stream: StreamLike) -> np.ndarray:
        """Mark block ``block_id``'s publication ``uid`` ready once the producer's ``stream`` gets there: its
        timeline slot (written from the host at once when that stream is idle), or its ready event (whose IPC
        handle, returned, goes in the descriptor)."""
        handle = stream_handle(stream)
        timeline = self._timeline[0]
        with context_for(handle, self.device):
            if timeline is not None:
                # A producer that synchronized its stream (a camera's fill, say) needs no GPU command: a query and
                # a host store cost less than enqueueing the write.  Only for a non-blocking stream: the write
                # enqueued on a default or a blocking stream would also wait for other streams' work (the legacy
                # stream's, or every blocking one's), which this stream's idleness says nothing of.
                if handle not in DEFAULT_STREAMS and stream_non_blocking(handle) and stream_idle(handle):
                    timeline.mark(block_id, uid)
                else:
                    timeline.signal(block_id, uid, handle)
                self._signaled[block_id] = uid
            else:
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

    def __init__(self, header: PoolHeader, fd: int, local: CudaMemory | None, metadata_fd: int) -> None:
        with on_device(header.device):
            self._import(header, fd, local, metadata_fd)

    def _import(self, header: PoolHeader, fd: int, local: CudaMemory | None, metadata_fd: int) -> None:
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
        self._timeline: Timeline | None = None
        self._waited = [0] * header.block_count  # the uid each block's last read waited for: what views order on
        try:
            if header.sync == SYNC_TIMELINE:
                try:
                    self._timeline = Timeline(metadata_fd, header, writable=False)
                except CudaDriverError as exc:
                    raise CudaUnavailableError(f"the pool signals readiness by timeline values, and this process "
                                               f"could not register them with CUDA: {exc}") from None
            if local is not None:
                local.retain()  # the pool's events and allocation serve this import until it closes
        except BaseException:
            close_timeline(self._timeline)
            unmap_memory(self.base_address, self.size)
            raise
        self._finalizer = weakref.finalize(self, _free_import, self.device, self._events,
                                           (self.base_address, self.size), local, self._timeline)

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

    def wait_ready(self, desc: ReadySignal, stream: int) -> bool:
        """Make ``stream`` wait for the producer's writes to the block; the host does not wait.

        Returns whether those writes had finished already (then no consumer stream needs to wait).
        ``stream`` may be on another device (cross-device reads): a stream can wait on any device's event, and
        on the timeline slots, registered for every context.
        """
        if self._timeline is not None:
            self._waited[desc.block_id] = desc.uid
            with context_for(stream, self.device):
                return self._timeline.wait(desc.block_id, desc.uid, stream)
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
            if self._timeline is not None:
                with context_for(stream, self.device):
                    self._timeline.wait(block_id, self._waited[block_id], stream)
                return
            event = self._local.ready_event(block_id) if self._local is not None else self._events[block_id][1]
            with context_for(stream, self.device):
                wait_unless_done(stream, event)

        return order_on

    def release_after(self, stream: int, release: Callable[[], None]) -> None:
        """Drop the lease once the consumer's work queued on ``stream`` so far has finished."""
        releaser().release_after(self.device, stream, release)


def import_cuda_memory(header: PoolHeader, fd: int, local: CudaMemory | None, metadata_fd: int) -> ImportedCudaMemory:
    """A reader's mapping of a pool: from ``fd``, or from ``local``, the pool's own memory in this process;
    its timeline slots mapped from ``metadata_fd`` when it signals readiness by them."""
    require_cuda(header.device)
    return ImportedCudaMemory(header, fd, local, metadata_fd)
