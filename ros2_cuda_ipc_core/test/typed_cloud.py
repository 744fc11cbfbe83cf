"""A toy typed package over the core typed layer, for its tests: packed 22-byte records (a Velodyne-like
point: x, y, z, intensity float32 at 0..12, ring uint16 at 16, time float32 at 18, so ``time`` is not
element-aligned), rows ``row_step`` apart, carried by ``GpuPointCloud2`` (its field table unused here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import InvalidDescriptorError, ReadHandle, StridedLayout, TypedReader, TypedView
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

FIELDS = {"x": (0, np.float32), "y": (4, np.float32), "z": (8, np.float32), "intensity": (12, np.float32),
          "ring": (16, np.uint16), "time": (18, np.float32)}
POINT_STEP = 22


@dataclass(frozen=True)
class RecordLayout:
    height: int
    width: int
    row_step: int
    point_step: int = POINT_STEP

    @property
    def byte_extent(self) -> int:
        return (self.height - 1) * self.row_step + self.width * self.point_step

    @property
    def padded_extent(self) -> int:
        return self.height * self.row_step

    def field(self, name: str) -> StridedLayout:
        offset, dtype = FIELDS[name]
        return StridedLayout((self.height, self.width), (self.row_step, self.point_step), np.dtype(dtype), offset=offset)

    def xyz(self) -> StridedLayout:
        """x, y, z as one (height, width, 3) array."""
        return StridedLayout((self.height, self.width, 3), (self.row_step, self.point_step, 4), np.dtype(np.float32))

    def fill_message(self, msg: Any) -> None:
        msg.height, msg.width, msg.row_step, msg.point_step = self.height, self.width, self.row_step, self.point_step

    @classmethod
    def from_message(cls, msg: Any) -> RecordLayout:
        if msg.point_step != POINT_STEP:
            raise InvalidDescriptorError(f"point_step {msg.point_step} is not {POINT_STEP}")
        layout = cls(msg.height, msg.width, msg.row_step)
        for name in FIELDS:
            layout.field(name).validate(int(msg.core.byte_size))
        return layout


class RecordReader(TypedReader[RecordLayout, GpuPointCloud2, TypedView[RecordLayout]]):
    def layout_of(self, msg: GpuPointCloud2) -> RecordLayout:
        return RecordLayout.from_message(msg)

    def view_of(self, handle: ReadHandle, layout: RecordLayout, msg: GpuPointCloud2,
                stream: int) -> TypedView[RecordLayout]:
        return TypedView(handle, layout, msg.header, stream)


def expected(name: str, height: int, width: int) -> np.ndarray:
    """The values the tests write into field ``name``."""
    index = np.arange(height * width).reshape(height, width)
    return (index * (list(FIELDS).index(name) + 1) % 1000).astype(FIELDS[name][1])
