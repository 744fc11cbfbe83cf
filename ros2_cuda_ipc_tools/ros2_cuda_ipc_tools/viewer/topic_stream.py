"""One viewed topic: its subscription's frames turned into a layer's contents, and what the overlay says of it.

``ImageStream`` and ``CloudStream`` take a leased view, hand its bytes to their layer (GPU copy or
host upload), and give the lease back before returning; they count frames, keep the stamps of
frames not yet on screen, and the frame-to-screen latency of those that were drawn.
"""

from __future__ import annotations

import collections
import statistics
import textwrap
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .cloud_layer import CloudLayer, PointFormat
from .image_layer import ImageLayer, texture_format
from .staging import FrameBytes
from .value_range import ValueRange

__all__ = ["CloudStream", "ImageStream", "TopicStream"]

#: Pools a topic remembers having read from (a topic has one publisher, or a few).
_POOLS_KEPT = 8


class TopicStream:
    """Counters and the overlay text of one topic; subclasses put frames into their layer."""

    kind = "topic"

    def __init__(self, topic: str, layer: Any, value_range: ValueRange) -> None:
        self.topic = topic
        self.layer = layer
        self.value_range = value_range
        self.received = 0  #: frames whose bytes reached the layer
        self.drawn = 0  #: frames that were on screen (several received between two draws count once)
        self.refused = 0  #: messages that could not be shown (invalid, unsupported; stale ones are counted apart)
        self.reads = 0  #: this topic's frames leased (the process's one reader counts every topic's)
        self.stale = 0  #: this topic's frames already reused by their publisher when read (the viewer fell behind)
        self.last_problem = ""
        self._pools: collections.OrderedDict[str, None] = collections.OrderedDict()  # recent pools (hex ids) read
        self._pending_stamps: list[int] = []
        self._arrivals: collections.deque[float] = collections.deque(maxlen=240)
        self.latencies_ms: collections.deque[float] = collections.deque(maxlen=600)

    @property
    def has_new_frame(self) -> bool:
        return bool(self._pending_stamps)

    def note_read(self, pool_id: str) -> None:
        """A frame of this topic leased from pool ``pool_id`` (hex); the last few pools are kept, for its leases."""
        self.reads += 1
        self._pools[pool_id] = None
        self._pools.move_to_end(pool_id)
        if len(self._pools) > _POOLS_KEPT:
            self._pools.popitem(last=False)

    def note_stale(self) -> None:
        self.stale += 1

    def leases(self, leases_by_pool: Mapping[str, int]) -> int:
        """Leases held now on the pools this topic's frames came from (the reader's ``leases_by_pool()``)."""
        return sum(leases_by_pool.get(pool_id, 0) for pool_id in self._pools)

    def frame_arrived(self, stamp: Any) -> None:
        self.received += 1
        self._arrivals.append(time.monotonic())
        self._pending_stamps.append(int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec))  # 0: unstamped

    def frame_drawn(self, now_ns: int) -> None:
        """The frames staged since the last draw are on screen at ``now_ns`` (system clock, like the stamps)."""
        if self._pending_stamps:
            self.drawn += 1
            self.latencies_ms.extend((now_ns - stamp) / 1e6 for stamp in self._pending_stamps if stamp)
            self._pending_stamps.clear()

    def fps(self) -> float:
        now = time.monotonic()
        recent = [t for t in self._arrivals if now - t <= 2.0]
        return (len(recent) - 1) / (recent[-1] - recent[0]) if len(recent) > 1 and recent[-1] > recent[0] else 0.0

    def refuse(self, problem: str) -> None:
        self.refused += 1
        self.last_problem = problem

    def describe(self) -> str:
        """What the layer shows, for the overlay's second line."""
        return ""

    def overlay_text(self, leases_by_pool: Mapping[str, int]) -> str:
        """What the overlay says, written while the frame staged last is drawn: it counts as drawn.  Its counts are
        this topic's own (they were the process's reader's: each tile said 'reads 77' where one topic had 57)."""
        if not self.received:
            lines = [f"{self.topic}", f"waiting for the first {self.kind} ..."]
        else:
            latency = f"{statistics.median(self.latencies_ms):.1f} ms" if self.latencies_ms else "-"
            lines = [f"{self.topic}  {self.describe()}",
                     f"{self.fps():5.1f} fps   latency p50 {latency}   path {self.layer.upload.name}",
                     f"frames {self.received}  drawn {self.drawn + self.has_new_frame}  refused {self.refused}   "
                     f"reads {self.reads}  stale {self.stale}  leases {self.leases(leases_by_pool)}"]
        if self.last_problem:
            lines += textwrap.wrap(self.last_problem, 90)[:3]
        return "\n".join(lines)


class ImageStream(TopicStream):
    kind = "image"

    def __init__(self, topic: str, layer: ImageLayer, value_range: ValueRange) -> None:
        super().__init__(topic, layer, value_range)
        self._shape = ""

    def show(self, view: Any, cuda_stream: Any) -> None:
        """Put a leased ``ImageView`` into the texture (its lease may go when this returns)."""
        layout = view.layout
        rows, cols, channels = layout.shape
        fmt = texture_format(layout.encoding, layout.dtype, channels)
        if channels > 1 and layout.strides[2] != layout.dtype.itemsize:
            raise ValueError(f"planar images (channel stride {layout.strides[2]}) are not drawn yet")
        frame = FrameBytes(view.handle.device_ptr + layout.offset, view.memory, view.handle.device_id, (rows, cols),
                           layout.strides[:2], channels * layout.dtype.itemsize, cuda_stream)
        needs_values = self.value_range.fixed is None and self.value_range.spec == "auto"
        if needs_values and cuda_stream is not None:
            cuda_stream.sync()  # the producer's event has fired: torch / cupy may read the frame on any stream
        lo_hi = self.value_range.of(view.array, view.memory, layout.dtype) if channels == 1 else (0.0, 255.0)
        self.layer.show(frame, fmt, lo_hi)
        self.frame_arrived(view.header.stamp)
        self._shape = f"{cols}x{rows} {layout.encoding or layout.dtype}"

    def describe(self) -> str:
        return self._shape


class CloudStream(TopicStream):
    kind = "point cloud"

    def __init__(self, topic: str, layer: CloudLayer, value_range: ValueRange, color_field: str) -> None:
        super().__init__(topic, layer, value_range)
        self.color_field = color_field
        self._points = ""
        self._formats: dict[Any, PointFormat] = {}

    def _point_format(self, layout: Any) -> tuple[PointFormat, np.dtype | None]:
        geometry = layout.xyz_geometry  # ValueError saying why when x, y, z are not consecutive float32
        if not geometry.dtype.isnative:
            raise ValueError("big-endian points are not drawn")
        value = layout.field(self.color_field) if self.color_field in layout.field_names else None
        key = (layout.point_step, geometry.offset, None if value is None else (value.offset, value.dtype.str))
        if key not in self._formats:
            self._formats[key] = PointFormat(layout.point_step, geometry.offset,
                                             None if value is None else value.offset,
                                             None if value is None else value.dtype)
        return self._formats[key], None if value is None else value.dtype

    def show(self, view: Any, cuda_stream: Any) -> None:
        """Put a leased ``PointCloudView``'s points into the vertex buffer (its lease may go when this returns)."""
        layout = view.layout
        point, value_dtype = self._point_format(layout)
        points = layout.points_geometry
        frame = FrameBytes(view.handle.device_ptr, view.memory, view.handle.device_id, points.shape, points.strides,
                           layout.point_step, cuda_stream)
        lo_hi = (0.0, 1.0)
        if value_dtype is not None:
            if self.value_range.spec == "auto" and cuda_stream is not None:
                cuda_stream.sync()
            lo_hi = self.value_range.of(view.field(self.color_field), view.memory, value_dtype)
        self.layer.show(frame, point, lo_hi)
        self.frame_arrived(view.header.stamp)
        self._points = f"{layout.point_count} points of {layout.point_step} B"

    def describe(self) -> str:
        return self._points
