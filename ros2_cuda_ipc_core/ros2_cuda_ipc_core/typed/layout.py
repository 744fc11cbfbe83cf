"""``StridedLayout``: one typed array inside a block, and ``BlockLayout``, what a typed message's layout must offer.

Byte strides throughout.  Every check runs with Python integers (no overflow) and before any lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from ..errors import InvalidDescriptorError
from ..memory.dlpack_dtype import DLPackDType
from ..memory.views import contiguous_strides

_Layout = TypeVar("_Layout", bound="StridedLayout")


class TypedMessage(Protocol):
    """A typed message: a ``header``, the ``core`` descriptor, and its layout's own fields."""

    header: Any
    core: Any


class BlockLayout(Protocol):
    """What the generic publisher, frame, reader and view need from a typed package's layout."""

    @property
    def byte_extent(self) -> int:
        """Bytes from the block's first byte to one past the last byte the layout uses."""
        ...

    @property
    def padded_extent(self) -> int:
        """Bytes a message carries when the block has room: ``byte_extent`` plus trailing row padding."""
        ...

    def fill_message(self, msg: Any) -> None:
        """Write the layout's fields into a typed message (its ``core`` is filled by the publisher).

        Every field but ``header`` and ``core``, on every call: the message may hold another layout's fields (the
        publisher builds its next message ahead, filled with its own layout)."""
        ...


@dataclass(frozen=True)
class StridedLayout:
    """``shape`` elements of ``dtype``, ``strides`` bytes apart, the first one ``offset`` bytes into the block.

    Strides need not be whole elements (a packed point cloud's field is not): such an array is read
    through the CUDA Array Interface or a strided copy; :attr:`dlpack_problem` says why DLPack cannot take it.
    ``element`` is set for a type numpy has no dtype for (bfloat16, float8): ``dtype`` is then the unsigned
    integer of its size, which holds its bits, and DLPack exports the elements as ``element``.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    offset: int = field(default=0, kw_only=True)
    element: DLPackDType | None = field(default=None, kw_only=True)

    #: Names of the axes in error messages ("row stride 7 ..."); "axis 0" and so on when not given.
    axis_names: ClassVar[tuple[str, ...]] = ()
    #: Whether :meth:`validate` refuses strides that are not whole elements (images: every consumer assumes so).
    whole_elements: ClassVar[bool] = False

    @classmethod
    def contiguous(cls, shape: Sequence[int], dtype: Any, offset: int = 0) -> StridedLayout:
        """A C-ordered (row-major, dense) layout."""
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
        return cls(shape, contiguous_strides(shape, dtype.itemsize), dtype, offset=offset)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def byte_extent(self) -> int:
        """Bytes from the block's first byte to one past the last element (``offset`` for an empty array)."""
        if 0 in self.shape:
            return self.offset
        return self.offset + sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides, strict=True)) \
            + self.dtype.itemsize

    @property
    def padded_extent(self) -> int:
        return self.byte_extent

    @property
    def dlpack_problem(self) -> str | None:
        """Why DLPack (whose strides count whole elements) cannot describe this array, or None if it can."""
        item = self.dtype.itemsize
        if self.offset % item:
            return f"it starts at byte {self.offset}, not on a {item}-byte {self.dtype} boundary"
        if any(s % item for s in self.strides):
            return f"its byte strides {self.strides} are not whole {item}-byte {self.dtype} elements"
        return None

    def _axis(self, index: int) -> str:
        return self.axis_names[index] if index < len(self.axis_names) else f"axis {index}"

    def validate(self: _Layout, byte_size: int) -> _Layout:
        """Raise InvalidDescriptorError naming what is wrong; return self if the layout fits ``byte_size`` bytes.

        Refused: a zero extent, strides that make elements overlap, any byte outside ``[0, byte_size)``,
        and, when the class says :attr:`whole_elements`, a stride that is not a multiple of the element size.
        """
        shape, strides, item = self.shape, self.strides, self.dtype.itemsize
        if len(strides) != len(shape):
            raise InvalidDescriptorError(f"shape {shape} and strides {strides} differ in length")
        if min(shape, default=1) <= 0:
            raise InvalidDescriptorError(f"shape {shape} has a {'zero' if 0 in shape else 'negative'} extent")
        for index, stride in enumerate(strides):
            if abs(stride) > byte_size:  # even on an axis of extent 1, where it moves nothing, consumers choke on it
                raise InvalidDescriptorError(f"{self._axis(index)} stride {stride} reaches outside the {byte_size} "
                                             "bytes available")
        if self.whole_elements:
            for index, stride in enumerate(strides):
                if stride % item:
                    raise InvalidDescriptorError(f"{self._axis(index)} stride {stride} is not a multiple of the "
                                                 f"{item}-byte element")
        reach, end = item, self.offset + item
        for stride, extent in sorted(zip(strides, shape, strict=True)):
            if extent > 1:  # from the innermost axis out: each must step over everything inside it
                if stride < reach:
                    raise InvalidDescriptorError(f"strides {strides} make elements of shape {shape} overlap")
                reach = stride * extent
                end += (extent - 1) * stride
        if self.offset < 0 or end > byte_size:
            raise InvalidDescriptorError(f"shape {shape} with strides {strides} at offset {self.offset} spans bytes "
                                         f"[{self.offset}, {end}), outside the {byte_size} bytes available")
        return self
