"""``SourceNode``: a pipeline's first node, which makes frames on a timer: pacing, limits and a clean start.

Parameters: ``fps``, ``frames`` (0: no limit), ``seconds`` (0: no limit), ``wait_for_subscribers``
(start once this many subscribe to ``output_topic``) and ``start_delay`` (then wait this long more,
so the rest of the pipeline is connected too), ``memory`` (auto), ``block_count`` (4), ``reuse_delay``
(0.01 s before a published block is reused) and ``frame_id``.
Once done, the node idles and keeps reporting.
"""

from __future__ import annotations

import time
from typing import Any

from std_msgs.msg import Header

from ros2_cuda_ipc_core import NodeParameter, not_negative, positive

from .arrays import ArrayBackend, choose_memory
from .pipeline_node import ParameterError, PipelineNode

__all__ = ["SourceNode"]


class SourceNode(PipelineNode):
    """Subclasses implement :meth:`emit` (make and publish one frame; False if none could be sent this tick)."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("fps", 30.0, "frames a second"),
        NodeParameter("frames", 0, "stop after this many frames (0: no limit)"),
        NodeParameter("seconds", 0.0, "stop after this many seconds (0: no limit)"),
        NodeParameter("wait_for_subscribers", 0, "start once this many nodes subscribe to the output"),
        NodeParameter("start_delay", 1.0, "then wait this many seconds more, so the rest of the pipeline is connected"),
        NodeParameter("frame_id", "frame", "frame_id of every header"),
        NodeParameter("memory", "auto", "where frames live: auto, cuda or host"),
    )

    #: The topic whose subscribers ``wait_for_subscribers`` counts.
    output_topic = "image"

    def __init__(self, default_name: str, **kwargs: Any) -> None:
        super().__init__(default_name, **kwargs)
        #: The typed publisher (an ``ImagePublisher``, a ``PointCloudPublisher``) the subclass makes; closed with the node.
        self.output: Any = None
        self.busy = 0  # ticks with every block still being read
        self.fps = positive("fps", self.parameter("fps"))
        self.frames: int = self.parameter("frames")
        self.wait_for_subscribers: int = self.parameter("wait_for_subscribers")
        for name in ("frames", "wait_for_subscribers"):  # each refused by its own name, not with the others
            not_negative(name, getattr(self, name))
        self.seconds = not_negative("seconds", self.parameter("seconds"))
        self.start_delay = not_negative("start_delay", self.parameter("start_delay"))
        self.block_count, self.reuse_delay = self.pool_parameters()
        self.frame_id = self.parameter("frame_id")
        self.memory, self.memory_reason = choose_memory(self.parameter("memory"))
        arrays = self.backend(self.memory)
        if arrays is None:
            raise ParameterError(f"no array library for {self.memory} memory")
        self.arrays: ArrayBackend = arrays
        resolve = getattr(self, "resolve_topic_name", None)  # rclpy newer than Humble's first releases
        self._topic = resolve(self.output_topic) if resolve is not None else self.output_topic
        self.seq = 0
        self._started: float | None = None
        self._ready_at: float | None = None
        self._elapsed = 0.0

    def start_timer(self) -> None:
        """Call at the end of the subclass's constructor, once it can emit."""
        self.create_timer(1.0 / self.fps, self._tick)

    def emit(self) -> bool:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        """Whether the source has sent its ``frames`` or run its ``seconds``."""
        if self.frames and self.seq >= self.frames:
            return True
        return bool(self.seconds and self._started is not None and time.monotonic() - self._started >= self.seconds)

    def _subscribers_ready(self) -> bool:
        if self._ready_at is None:
            if self.count_subscribers(self._topic) < self.wait_for_subscribers:
                return False
            self._ready_at = time.monotonic() + (self.start_delay if self.wait_for_subscribers else 0.0)
        return time.monotonic() >= self._ready_at

    def _tick(self) -> None:
        if self.done or not self._subscribers_ready():
            return
        if self._started is None:
            self._started = time.monotonic()
        if self.emit():
            self.seq += 1
            self.counts["out"] += 1
            if self.counts["out"] >= self.warmup_frames:
                self.warmup_over()
            self._elapsed = round(time.monotonic() - self._started, 3)  # first frame to the last one sent

    def frames_done(self) -> int:
        return self.counts["out"]

    def header(self) -> Header:
        """A header stamped now: the time every consumer's latency is measured from."""
        return Header(stamp=self.get_clock().now().to_msg(), frame_id=self.frame_id)

    def extra_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {"source": True, "done": self.done, "elapsed_s": self._elapsed, "memory": self.memory,
                                 "acquire_misses": self.busy}
        if self.output is not None:
            stats["leases_held"] = self.output.pool.stats()["blocks_held_by_readers"]
        return stats

    def destroy_node(self) -> None:
        if getattr(self, "output", None) is not None:  # unset when the parameters were refused
            self.output.close()
            self.output = None
        super().destroy_node()
