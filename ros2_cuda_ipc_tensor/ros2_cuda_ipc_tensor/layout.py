"""``TensorLayout``: the checked geometry of one N-d tensor, from a ``GpuTensor`` or from publisher arguments.

A tensor is the typed layer's strided layout with a DLPack element type and optional dimension names, and
no further meaning.  Every rule is checked with Python integers before any lease is taken, each failure an
``InvalidDescriptorError`` naming the message field; an empty tensor, whose bytes are none, still has to be
one an array can be (extents, strides and element count within int64: core's ``beyond_array_limits``).
"""

from __future__ import annotations

import array
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ros2_cuda_ipc_core import DLPackDType, InvalidDescriptorError, StridedLayout, beyond_array_limits
from ros2_cuda_ipc_msgs.msg import GpuTensor

#: Most dimensions a tensor may have (DLPack has no limit; a descriptor with thousands would cost every reader).
MAX_RANK = 16


@dataclass(frozen=True)
class TensorLayout(StridedLayout):
    """Shape, byte strides and storage ``dtype`` (typed layer), its DLPack type, and ``dim_names`` (may be empty)."""

    dim_names: tuple[str, ...] = field(default=(), kw_only=True)

    whole_elements: ClassVar[bool] = True  # DLPack and every framework count strides in elements

    @classmethod
    def create(cls, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None = None,
               dim_names: Sequence[str] = (), byte_offset: int = 0) -> TensorLayout:
        """A layout from ``shape``, ``dtype`` (numpy, torch, a name or a DLPack triple), ``strides`` **in elements**
        (None: contiguous) and ``dim_names``; InvalidDescriptorError naming the field that is wrong."""
        try:
            element = DLPackDType.of(dtype)
        except ValueError as exc:
            raise InvalidDescriptorError(f"dtype: {exc}") from None
        return cls._build(_integers(shape, "shape"), None if strides is None else _integers(strides, "strides"),
                          element, int(byte_offset), tuple(str(name) for name in dim_names))

    @classmethod
    def from_message(cls, msg: GpuTensor) -> TensorLayout:
        """The message's layout, checked against ``msg.core.byte_size``."""
        element = DLPackDType.from_fields(msg.dtype_code, msg.dtype_bits, msg.dtype_lanes, "GpuTensor")
        if len(msg.shape) > MAX_RANK:  # before converting anything a sender made long
            raise InvalidDescriptorError(f"GpuTensor shape has {len(msg.shape)} dimensions; at most {MAX_RANK}")
        for name in ("strides", "dim_names"):
            if len(getattr(msg, name)) > MAX_RANK:
                raise InvalidDescriptorError(f"GpuTensor {name} has {len(getattr(msg, name))} entries; at most {MAX_RANK}")
        strides = _integers(msg.strides, "strides")
        layout = cls._build(_integers(msg.shape, "shape"), strides or None, element, int(msg.byte_offset),
                            tuple(msg.dim_names))
        return layout.validate(int(msg.core.byte_size))

    @classmethod
    def _build(cls, shape: tuple[int, ...], strides: tuple[int, ...] | None, element: DLPackDType, byte_offset: int,
               dim_names: tuple[str, ...]) -> TensorLayout:
        rank, item = len(shape), element.itemsize
        if rank > MAX_RANK:
            raise InvalidDescriptorError(f"GpuTensor shape has {rank} dimensions; at most {MAX_RANK}")
        for index, extent in enumerate(shape):
            if extent < 0:
                raise InvalidDescriptorError(f"GpuTensor shape[{index}] is {extent}: extents cannot be negative")
        if strides is None:
            strides = tuple(s // item for s in StridedLayout.contiguous(shape, element.storage).strides)
        if len(strides) != rank:
            raise InvalidDescriptorError(f"GpuTensor strides has {len(strides)} entries for {rank} dimensions "
                                         "(empty means contiguous)")
        for index, stride in enumerate(strides):
            if stride < 0:
                raise InvalidDescriptorError(f"GpuTensor strides[{index}] is {stride}: negative strides are not "
                                             "carried (publish a flipped tensor as a copy)")
        if byte_offset < 0:
            raise InvalidDescriptorError(f"GpuTensor byte_offset {byte_offset} is negative")
        if byte_offset % item:
            raise InvalidDescriptorError(f"GpuTensor byte_offset {byte_offset} is not a multiple of the {item}-byte "
                                         f"{element} element")
        if dim_names and len(dim_names) != rank:
            raise InvalidDescriptorError(f"GpuTensor dim_names has {len(dim_names)} names for {rank} dimensions "
                                         "(give none, or one per dimension)")
        byte_strides = tuple(s * item for s in strides)
        problem = beyond_array_limits(shape, byte_strides, item, byte_offset)
        if problem is not None:  # an empty tensor too: numpy refuses it when the view is made, naming nothing
            raise InvalidDescriptorError(f"GpuTensor {problem}")
        numpyless = element if element.numpy is None else None
        return cls(shape, byte_strides, element.storage, offset=byte_offset, element=numpyless, dim_names=dim_names)

    @property
    def dlpack_dtype(self) -> DLPackDType:
        """The elements' type as DLPack names it (``element`` for bfloat16 / float8, else from ``dtype``)."""
        return self.element or DLPackDType.of(self.dtype)

    @property
    def element_strides(self) -> tuple[int, ...]:
        """Strides in elements, as the message, DLPack and torch count them."""
        return tuple(s // self.dtype.itemsize for s in self.strides)

    @property
    def padded_extent(self) -> int:
        """At least one element: an empty tensor (no detections, say) still publishes its block (of 1+ bytes)."""
        return max(self.byte_extent, self.offset + self.dtype.itemsize)

    def validate(self, byte_size: int) -> TensorLayout:
        """The typed layer's checks (no overlap, every byte inside ``byte_size``), naming the message fields."""
        if 0 in self.shape:  # an empty tensor (no detections, say) touches no byte
            if self.offset > byte_size:
                raise InvalidDescriptorError(f"GpuTensor byte_offset {self.offset} is beyond core.byte_size {byte_size}")
            return self
        try:
            return super().validate(byte_size)
        except InvalidDescriptorError as exc:
            raise InvalidDescriptorError(f"GpuTensor shape / strides / byte_offset against core.byte_size "
                                         f"{byte_size}: {exc}") from None

    def with_batch(self, shape: Sequence[int]) -> TensorLayout:
        """This capacity's layout carrying ``shape``: the same but for a leading dimension no larger than ours."""
        shape = tuple(int(n) for n in shape)
        if len(shape) != self.ndim or shape[1:] != self.shape[1:] or not 0 <= shape[0] <= self.shape[0]:
            raise ValueError(f"shape {shape} does not fit this publisher's {self.shape}: only the leading dimension "
                             f"may be smaller")
        return self if shape == self.shape else replace(self, shape=shape)

    def fill_message(self, msg: GpuTensor) -> None:
        msg.dtype_code, msg.dtype_bits, msg.dtype_lanes = self.dlpack_dtype.triple
        # int64[] sequences are array('q') in rclpy messages: assigned as one, with no per-element check (Humble's
        # setters, and Jazzy's with ROS_PYTHON_CHECK_FIELDS=1, refuse numpy integers element by element).
        msg.shape = array.array("q", self.shape)
        msg.strides = array.array("q", self.element_strides)
        msg.byte_offset = self.offset
        msg.dim_names = list(self.dim_names)


def _integers(values: Any, name: str) -> tuple[int, ...]:
    try:
        return tuple(operator.index(int(n)) for n in values)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidDescriptorError(f"GpuTensor {name} must hold integers: {exc}") from None
