"""``ImageLayout``: the checked geometry of one image, from a ``GpuImage`` or from publisher arguments.

Every rule is checked before any lease is taken, so a malformed message never pins a block.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ros2_cuda_ipc_core import InvalidDescriptorError, StridedLayout
from ros2_cuda_ipc_msgs.msg import GpuImage

from .encodings import DTYPE_CODES, check_consistent, dtype_code


@dataclass(frozen=True)
class ImageLayout(StridedLayout):
    """Rows, columns, channels, their byte strides, the element type and the encoding (may be '')."""

    shape: tuple[int, int, int]
    strides: tuple[int, int, int]
    dtype: np.dtype
    encoding: str = ""

    axis_names: ClassVar[tuple[str, ...]] = ("row", "column", "channel")
    whole_elements: ClassVar[bool] = True  # every image consumer assumes it

    @property
    def row_bytes(self) -> int:
        return self.shape[1] * self.shape[2] * self.dtype.itemsize

    @property
    def rows_are_packed(self) -> bool:
        """Each row holds its pixels back to back, interleaved channels (the sensor_msgs/Image layout)."""
        _, cols, channels = self.shape
        item = self.dtype.itemsize
        return (channels == 1 or self.strides[2] == item) and (cols == 1 or self.strides[1] == channels * item)

    @property
    def padded_extent(self) -> int:
        """Whole rows, the last row's padding included."""
        return max(self.byte_extent, self.shape[0] * self.strides[0])

    def validate(self, byte_size: int) -> ImageLayout:
        """Raise InvalidDescriptorError naming the field that is wrong; return self if all is well."""
        super().validate(byte_size)
        check_consistent(self.encoding, self.dtype, self.shape[2])
        return self

    @classmethod
    def from_message(cls, msg: GpuImage) -> ImageLayout:
        try:
            shape = tuple(operator.index(int(n)) for n in msg.shape)
            strides = tuple(operator.index(int(s)) for s in msg.strides)
        except (TypeError, ValueError) as exc:
            raise InvalidDescriptorError(f"shape/strides are not integers: {exc}") from None
        if len(shape) != 3 or len(strides) != 3:
            raise InvalidDescriptorError(f"shape {shape} and strides {strides} must have 3 entries each")
        if msg.dtype not in DTYPE_CODES:
            raise InvalidDescriptorError(f"dtype code {msg.dtype} is not one of GpuImage's DTYPE_* constants")
        layout = cls(shape, strides, DTYPE_CODES[msg.dtype], msg.encoding)
        return layout.validate(int(msg.core.byte_size))

    def fill_message(self, msg: GpuImage) -> None:
        msg.dtype = dtype_code(self.dtype)
        msg.shape = np.array(self.shape, dtype=np.uint32)
        msg.strides = np.array(self.strides, dtype=np.uint64)
        msg.encoding = self.encoding


def packed_layout(height: int, width: int, channels: int, dtype: np.dtype, row_stride: int,
                  encoding: str = "") -> ImageLayout:
    """Interleaved channels, rows ``row_stride`` bytes apart."""
    item = np.dtype(dtype).itemsize
    return ImageLayout((height, width, channels), (row_stride, channels * item, item), np.dtype(dtype), encoding)
