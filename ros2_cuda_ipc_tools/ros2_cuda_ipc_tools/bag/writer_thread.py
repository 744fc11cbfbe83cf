"""``WriterThread``: serialization and disk writes off the subscription callbacks, behind a bounded queue.

Callbacks only :meth:`offer` what they received (a downloaded frame still in flight on the side stream,
or a message's bytes) and never wait: a full queue refuses, and the caller counts the frame dropped.
The thread waits for each frame's copy (its event), appends the message to the bag from where its bytes
lie (the ring buffer, or the leased block of a frame written in place), then gives the buffer (and the
lease) back.  A disk error stops the recording; the bag keeps what was written.
Every call into the bag runs on this thread (SQLite3 connections belong to the thread that made them).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ros2_cuda_ipc_core import Ros2CudaIpcError

from .frame_ring import FrameRing, RingBuffer
from .recordings import GpuRecording, PendingFrame
from .split_writer import SplitBagWriter
from .topic_counts import TopicCounts

log = logging.getLogger("bag_record")

__all__ = ["QueuedMessage", "WriterThread"]


@dataclass
class QueuedMessage:
    """One message for the bag: ``raw`` CDR bytes, or a GPU ``frame`` being downloaded into ``buffer``."""

    topic: str
    timestamp: int
    counts: TopicCounts
    raw: bytes | None = None
    recording: GpuRecording | None = None
    frame: PendingFrame | None = None
    buffer: RingBuffer | None = None
    ring: FrameRing | None = None
    done: Any = None  #: the cuda.core Event recorded after the copy (None: the copy was done when queued)

    def release(self) -> None:
        if self.frame is not None and self.frame.source is not None and self.ring is not None:
            self.frame.release()  # the block's lease goes with the view
            self.ring.give_in_place()
        if self.buffer is not None and self.ring is not None:
            self.ring.give(self.buffer)
            self.buffer = None


class WriterThread:
    """Owns ``sink`` from :meth:`start` to :meth:`close`; ``error`` is set (and writing stops) on a disk error."""

    def __init__(self, sink: SplitBagWriter, capacity: int) -> None:
        self.sink = sink
        self.capacity = capacity
        self.error: BaseException | None = None
        self._queue: queue.Queue[QueuedMessage | Callable[[SplitBagWriter], None] | None] = queue.Queue(capacity)
        self._thread = threading.Thread(target=self._run, name="bag writer", daemon=True)
        self._on_device = False

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def start(self) -> None:
        self._thread.start()

    def add_topic(self, topic: str, msgtype: str, msgdef: str, rihs01: str) -> None:
        """Record ``topic`` from its next message on (queued behind the messages before it)."""
        self._queue.put(lambda sink: sink.add_topic(topic, msgtype, msgdef, rihs01))

    def offer(self, message: QueuedMessage) -> bool:
        """Queue ``message``; False (nothing queued) when the queue is full or writing has stopped."""
        if self.error is not None:
            return False
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            return False
        return True

    def _run(self) -> None:
        while (message := self._queue.get()) is not None:
            if callable(message):
                message(self.sink)
            elif self.error is None:
                self._write(message)
            else:
                message.release()
        try:
            self.sink.close()
        except Exception as exc:
            self.error = self.error or exc

    def _write(self, message: QueuedMessage) -> None:
        try:
            try:
                parts: list[Any]
                if message.raw is not None:
                    parts = [message.raw]
                else:
                    assert message.recording is not None and message.frame is not None
                    if message.done is not None:
                        self._wait(message.done)
                    parts = message.recording.parts(message.frame, message.buffer)
            except (Ros2CudaIpcError, ValueError, TypeError) as exc:
                message.counts.add("failed")
                log.warning("%s: a frame could not be converted: %s", message.topic, exc)
                return
            size = sum(memoryview(p).nbytes for p in parts)
            try:
                self.sink.write(message.topic, message.timestamp, parts, size)
            except Exception as exc:  # the disk (full, gone) or the storage library: stop writing, keep the bag
                self.error = exc
                message.counts.add("lost")
                return
        finally:
            parts = []
            message.release()  # the ring buffer back, and the lease of a frame written in place
        message.counts.add("written")
        message.counts.add("bytes", size)

    def _wait(self, event: Any) -> None:
        """Wait for a frame's copy; the first time, make its device's context current on this thread."""
        if not self._on_device:
            event.device.set_current()
            self._on_device = True
        event.sync()
        event.close()

    def close(self) -> None:
        """Write what is queued, stop the thread, close the bag (its metadata written)."""
        self._queue.put(None)
        self._thread.join()
