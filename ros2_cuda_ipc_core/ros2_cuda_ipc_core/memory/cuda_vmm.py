"""CUDA VMM mappings and interprocess events: the driver calls behind a pool's blocks.

One exportable allocation (``cuMemCreate`` with the POSIX-fd handle type) per pool, reserved and
mapped at the device's granularity; readers map it read-only where the driver allows.  Ready events
travel as 64-byte IPC handles; a read makes the consumer's stream wait on them, never the host.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from typing import Any

from .cuda_context import DEFAULT_STREAMS, driver
from .cuda_driver import driver_call

log = logging.getLogger("ros2_cuda_ipc")


def allocation_prop(device: int) -> Any:
    """Pinned device memory on ``device``, exportable as a POSIX file descriptor."""
    cu = driver()
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    return prop


@functools.cache
def granularity(device: int) -> int:
    """VMM allocation granularity of ``device`` (2 MiB on current GPUs)."""
    cu = driver()
    flag = cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    return int(driver_call(cu.cuMemGetAllocationGranularity, allocation_prop(device), flag))


def map_memory(handle: Any, size: int, device: int, read_only: bool) -> tuple[int, bool]:
    """Reserve, map and grant access; returns (address, whether read-only is enforced by the driver)."""
    cu = driver()
    ptr = driver_call(cu.cuMemAddressReserve, size, granularity(device), 0, 0)
    try:
        driver_call(cu.cuMemMap, ptr, size, 0, handle, 0)
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
            driver_call(cu.cuMemSetAccess, ptr, size, [access], 1)
        except BaseException:
            unmap_memory(int(ptr), size)
            raise
    return int(ptr), enforced


def grant_read_access(address: int, size: int, device: int) -> None:
    """Let kernels on ``device`` read ``[address, address + size)``, a VMM mapping of another device's
    memory (VMM needs no ``cuCtxEnablePeerAccess``: access is per mapping)."""
    cu = driver()
    access = cu.CUmemAccessDesc()
    access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ
    if int(cu.cuMemSetAccess(address, size, [access], 1)[0]) == 0:
        return
    log.info("CUDA device %d cannot map a peer's memory read-only; its views are flagged read-only instead", device)
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    driver_call(cu.cuMemSetAccess, address, size, [access], 1)


def unmap_memory(ptr: int, size: int) -> None:
    cu = driver()
    cu.cuMemUnmap(ptr, size)
    cu.cuMemAddressFree(ptr, size)


def event_handle_bytes(event: Any) -> bytes:
    """The 64-byte ``CUipcEventHandle`` of an interprocess event, as it travels in a descriptor."""
    handle = driver_call(driver().cuIpcGetEventHandle, event)
    return ctypes.string_at(int(handle.getPtr()), 64)


def open_event_handle(data: bytes) -> Any:
    cu = driver()
    handle = cu.CUipcEventHandle()
    ctypes.memmove(int(handle.getPtr()), data, 64)
    return driver_call(cu.cuIpcOpenEventHandle, handle)


def wait_unless_done(stream: int, event: Any) -> bool:
    """Order ``stream`` after ``event``; an event that has already fired needs no GPU-side wait at all.

    Returns whether it had fired: then no stream, this one or another, needs to wait for it.
    """
    cu = driver()
    if cu.cuEventQuery(event)[0] == cu.CUresult.CUDA_SUCCESS:
        return True
    driver_call(cu.cuStreamWaitEvent, stream, event, 0)
    return False


def stream_idle(stream: int) -> bool:
    """Whether the work queued on ``stream`` so far has finished: a host query, nothing enqueued (for a default
    stream it says nothing of the other streams it waits for)."""
    cu = driver()
    return bool(cu.cuStreamQuery(stream)[0] == cu.CUresult.CUDA_SUCCESS)


def stream_non_blocking(stream: int) -> bool:
    """Whether ``stream`` was made ``CU_STREAM_NON_BLOCKING``: work on a blocking one also waits for the legacy
    default stream's, which its own idleness says nothing of.  False where the driver cannot say: the caller's
    next call on the stream then says why."""
    cu = driver()
    err, flags = cu.cuStreamGetFlags(stream)
    return err == cu.CUresult.CUDA_SUCCESS and bool(int(flags) & int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))


def stream_device(stream: int) -> int | None:
    """The device a stream belongs to; None for the default streams (they follow the current context)."""
    if stream in DEFAULT_STREAMS:
        return None
    return int(driver_call(driver().cuStreamGetDevice, stream))
