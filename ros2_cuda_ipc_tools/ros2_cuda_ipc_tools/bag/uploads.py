"""How ``bag_play`` puts a bag message's payload into a pool block: one copy for host pools, through page-locked
staging for CUDA pools.

A bag's bytes are pageable memory; a copy from there into the GPU makes the driver stage it and return
only when it is done.  :class:`PinnedUpload` copies them into one of a few page-locked (pinned) staging
buffers instead, enqueues the upload from there on its own stream (a true asynchronous DMA) and
publishes the block at once: the block's ready event, recorded on that stream, orders every reader
after the copy.  A staging buffer is reused only once the event recorded after its copy has fired, so
the player waits (if ever) for the copy of ``count`` uploads ago, never for the one it just made.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ros2_cuda_ipc_core import copy_rows

from .frame_ring import RingBuffer

__all__ = ["HostUpload", "PinnedUpload", "PoolUpload", "Upload"]


class Upload(Protocol):
    """Publish ``data`` (the payload, laid out as ``layout``) through ``publisher``; None if no block was free."""

    def __call__(self, publisher: Any, layout: Any, data: memoryview, header: Any) -> Any: ...

    def close(self) -> None: ...


class HostUpload:
    """Host pools: the bag's bytes copied into the block (``publish_bytes``), nothing else."""

    def __call__(self, publisher: Any, layout: Any, data: memoryview, header: Any) -> Any:
        return publisher.publish_bytes(data, layout, header)

    def close(self) -> None:
        pass


class _Staging:
    """One page-locked buffer and the event recorded after the last copy out of it."""

    def __init__(self) -> None:
        self.buffer: RingBuffer | None = None
        self.copied: Any = None

    def ready(self, size: int, device: int) -> RingBuffer:
        """The buffer, of at least ``size`` bytes, once its last copy is done (waited for here, if still running)."""
        if self.copied is not None:
            self.copied.sync()
            self.copied.close()
            self.copied = None
        if self.buffer is None or self.buffer.size < size:
            if self.buffer is not None:
                self.buffer.close()
            self.buffer = RingBuffer(size, "pinned", device)
        return self.buffer

    def close(self) -> None:
        if self.copied is not None:
            self.copied.sync()
            self.copied.close()
        if self.buffer is not None:
            self.buffer.close()


class PinnedUpload:
    """CUDA pools of ``device``: ``count`` page-locked staging buffers, used in turn, and one stream."""

    def __init__(self, device: int, count: int = 3) -> None:
        from cuda.core import Device

        self.device = device
        cuda = Device(device)
        cuda.set_current()
        self.stream = cuda.create_stream()
        self._staging = [_Staging() for _ in range(max(count, 1))]
        self._next = 0

    def __call__(self, publisher: Any, layout: Any, data: memoryview, header: Any) -> Any:
        size = len(data)
        if size > publisher.pool.block_size:
            raise ValueError(f"{size} bytes do not fit this publisher's {publisher.pool.block_size}-byte blocks")
        block = publisher.pool.acquire_for_publish()
        if block is None:
            return None
        with block:  # unpublished (an error) means cancelled
            if size:
                staging = self._staging[self._next]
                self._next = (self._next + 1) % len(self._staging)
                buffer = staging.ready(size, self.device)
                buffer.array((size,))[:] = np.frombuffer(data, np.uint8)
                copy_rows(block.device_ptr, size, buffer.address, size, size, 1, self.device, self.stream, wait=False)
                staging.copied = self.stream.record()
            return publisher.publish_block(block, layout, self.stream, header,
                                           byte_size=max(size, layout.byte_extent))

    def close(self) -> None:
        for staging in self._staging:
            staging.close()
        self.stream.close()


class PoolUpload:
    """Each publisher's upload by where its pool lives: pinned staging for CUDA pools (one per device, made at
    the first CUDA pool), a plain copy for host pools (``--memory auto`` may give either)."""

    def __init__(self) -> None:
        self._host = HostUpload()
        self._pinned: dict[int, PinnedUpload] = {}

    def __call__(self, publisher: Any, layout: Any, data: memoryview, header: Any) -> Any:
        pool = publisher.pool
        if pool.memory != "cuda":
            return self._host(publisher, layout, data, header)
        if pool.device not in self._pinned:
            self._pinned[pool.device] = PinnedUpload(pool.device)
        return self._pinned[pool.device](publisher, layout, data, header)

    def close(self) -> None:
        for pinned in self._pinned.values():
            pinned.close()
        self._pinned.clear()
