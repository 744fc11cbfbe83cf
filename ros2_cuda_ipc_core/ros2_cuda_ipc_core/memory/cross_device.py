"""Reading a CUDA pool from a stream on another GPU: peer mapping where the GPUs reach each other, else one copy.

Multi-GPU robots split work across devices (detection on one, depth or encoding on another).  A
consumer whose stream is on device B reading a pool on device A gets, per ``Reader(cross_device=...)``:

- ``"peer"``: the pool's existing mapping is also granted to B, read-only (``cuMemSetAccess`` with a
  location on B: VMM needs no ``cuCtxEnablePeerAccess``).  The address is the same in B's kernels
  (unified addressing), B reads it in place over NVLink or PCIe, no copy; the view says it is on B.
- ``"copy"``: one device-to-device copy (``cuMemcpyPeerAsync``) of the payload into a block of a small
  reader-side pool on B, on B's stream after the producer's ready event; the publisher's block is given
  back as soon as the copy has run, the reader-side block once the consumer's work on it has.
- ``"auto"`` (the default): ``"peer"`` where ``cuDeviceCanAccessPeer`` says B reaches A, else ``"copy"``.
- ``"refuse"``: ``DeviceMismatchError``, as before this existed.

Which path a pool takes from which device is logged once; ``Reader.stats()`` counts ``peer_reads`` and
``copied_reads``.
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import DeviceMismatchError, StaleDescriptorError
from .cuda_array import CudaArray
from .cuda_context import driver, on_device, primary_context
from .cuda_driver import driver_call
from .cuda_releaser import releaser
from .cuda_vmm import wait_unless_done
from .views import check_layout

if TYPE_CHECKING:
    from .cuda_memory import ImportedCudaMemory

log = logging.getLogger("ros2_cuda_ipc")

CrossDevice = Literal["auto", "peer", "copy", "refuse"]
CROSS_DEVICE_MODES: tuple[str, ...] = ("auto", "peer", "copy", "refuse")

#: Reader-side blocks kept per (device, block size): a consumer holding more copies than this at once is
#: keeping frames it no longer reads; the next read is then refused as stale rather than allocating without end.
STAGING_BLOCKS = 8


def check_cross_device(mode: str) -> CrossDevice:
    """``mode`` if it is one of :data:`CROSS_DEVICE_MODES`, else ValueError naming them."""
    if mode not in CROSS_DEVICE_MODES:
        raise ValueError(f"cross_device={mode!r}: expected one of {', '.join(map(repr, CROSS_DEVICE_MODES))}")
    return mode  # type: ignore[return-value]


@functools.cache
def can_access_peer(device: int, peer: int) -> bool:
    """Whether kernels on ``device`` can read memory that lives on ``peer`` (asked once per pair)."""
    cu = driver()
    return bool(driver_call(cu.cuDeviceCanAccessPeer, driver_call(cu.cuDeviceGet, device),
                            driver_call(cu.cuDeviceGet, peer)))


def choose_path(mode: CrossDevice, pool_device: int, stream_device: int) -> Literal["peer", "copy"]:
    """The path a read from ``stream_device`` of a pool on ``pool_device`` takes; DeviceMismatchError if none may."""
    if mode == "refuse":
        raise DeviceMismatchError(f"the stream is on CUDA device {stream_device}, the block is on device "
                                  f"{pool_device}: read it with a stream of the block's device, or let the "
                                  f"reader map or copy it (Reader(cross_device='auto'))")
    peer = can_access_peer(stream_device, pool_device)
    if mode == "peer" and not peer:
        raise DeviceMismatchError(f"CUDA device {stream_device} cannot access device {pool_device}'s memory "
                                  f"(cuDeviceCanAccessPeer): use cross_device='copy' or 'auto'")
    return "peer" if peer and mode != "copy" else "copy"


class PeerMapping:
    """A pool's mapping as seen from another device: the same addresses, views that say they are on ``device``."""

    def __init__(self, memory: ImportedCudaMemory, device: int) -> None:
        self._memory = memory
        self.device = device

    def address(self, offset: int) -> int:
        return self._memory.address(offset)

    def view(self, start: int, limit: int, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None,
             offset: int = 0, ready: bool = False, ordered_stream: int | None = None) -> CudaArray:
        return self._memory.view(start, limit, shape, dtype, strides, offset, ready, ordered_stream,
                                 device=self.device)

    def release_after(self, stream: int, release: Callable[[], None]) -> None:
        """``release`` once the consumer's work on ``stream``, a stream of this device, is done."""
        releaser().release_after(self.device, stream, release)


class StagingBlock:
    """One reader-side block on the consumer's device holding a copy of a frame; back to its pool on release."""

    def __init__(self, pool: StagingPool, address: int, event: Any) -> None:
        self._pool = pool
        self.device = pool.device
        self.base_address = address
        self.size = pool.block_size
        self._copied = event  # recorded on the read's stream after the copy: other streams wait on it

    def address(self, offset: int) -> int:
        return self.base_address + offset

    def view(self, start: int, limit: int, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None,
             offset: int = 0, ready: bool = False, ordered_stream: int | None = None) -> CudaArray:
        dtype = np.dtype(dtype)
        shape, strides = check_layout(shape, strides, dtype.itemsize, offset, limit)
        copied = self._copied

        def order_on(stream: int) -> None:
            if stream != ordered_stream:  # the read's own stream runs the copy: it needs no wait
                wait_unless_done(stream, copied)

        return CudaArray(self.base_address + start + offset, shape, strides, dtype, self.device, True, self, order_on)

    def release_source_after(self, stream: int, release: Callable[[], None]) -> None:
        """``release`` (the source block's lease) once the copy queued on ``stream`` has run."""
        releaser().release_after(self.device, stream, release)

    def release_after(self, stream: int) -> None:
        """Back to the reader-side pool once the consumer's work queued on ``stream`` so far is done."""
        releaser().release_after(self.device, stream, lambda: self._pool.give_back(self))


class StagingPool:
    """Up to :data:`STAGING_BLOCKS` plain device allocations of ``block_size`` bytes on ``device``, reused."""

    def __init__(self, device: int, block_size: int) -> None:
        self.device = device
        self.block_size = block_size
        self._free: list[StagingBlock] = []
        self._made: list[tuple[int, Any]] = []
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _free_staging, device, self._made)

    def borrow(self) -> StagingBlock:
        with self._lock:
            if self._free:
                return self._free.pop()
            if len(self._made) >= STAGING_BLOCKS:
                raise StaleDescriptorError(f"all {STAGING_BLOCKS} reader-side copies on CUDA device {self.device} "
                                           f"are still held by their consumers: drop this frame")
            cu = driver()
            with on_device(self.device):
                address = int(driver_call(cu.cuMemAlloc, self.block_size))
                event = driver_call(cu.cuEventCreate, cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            self._made.append((address, event))
            return StagingBlock(self, address, event)

    def give_back(self, block: StagingBlock) -> None:
        with self._lock:
            self._free.append(block)

    def close(self) -> None:
        self._finalizer()


def _free_staging(device: int, made: list[tuple[int, Any]]) -> None:
    cu = driver()
    with on_device(device):
        for address, event in made:
            cu.cuEventDestroy(event)
            cu.cuMemFree(address)


@functools.cache
def staging_pool(device: int, block_size: int) -> StagingPool:
    """The process's reader-side pool for blocks of ``block_size`` bytes on ``device`` (made on first use)."""
    return StagingPool(device, block_size)


def copy_to_device(memory: ImportedCudaMemory, start: int, byte_size: int, stream: int, device: int) -> StagingBlock:
    """Copy ``byte_size`` bytes at ``start`` of ``memory`` into a reader-side block on ``device``, on ``stream``.

    ``stream`` must already wait for the producer's ready event.  Then give the source back with
    :meth:`StagingBlock.release_source_after`, so the publisher gets its block back as soon as the copy has run,
    long before the consumer is done with the copy.
    """
    block = staging_pool(device, memory.block_size).borrow()
    cu = driver()
    try:
        driver_call(cu.cuMemcpyPeerAsync, block.base_address, primary_context(device), memory.address(start),
                    primary_context(memory.device), byte_size, stream)
        driver_call(cu.cuEventRecord, block._copied, stream)
    except BaseException:
        staging_pool(device, memory.block_size).give_back(block)
        raise
    return block
