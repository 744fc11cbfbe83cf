"""``CloudLayout``: the checked geometry of one point cloud, and ``FieldGeometry``, where one field lies in it.

A cloud is ``height`` rows of ``width`` points of ``point_step`` bytes, rows ``row_step`` apart,
exactly as in ``sensor_msgs/PointCloud2``.  Every rule is checked (with Python integers, so
nothing overflows) before any lease is taken, so a malformed message never pins a block.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from functools import cached_property
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import InvalidDescriptorError, StridedLayout

from .fields import DATATYPES, CloudField, fields_from_dtype, fields_from_msgs, structured_dtype, structured_name_clash
from .named_layouts import named_layout

#: Largest point accepted: far above any sensor's, far below what could make a size computation absurd.
MAX_POINT_STEP = 1 << 16


@dataclass(frozen=True)
class FieldGeometry(StridedLayout):
    """One field of every point: ``offset`` bytes into the block, then ``shape`` / byte ``strides``; ``name`` for errors."""

    name: str = dataclass_field(default="", kw_only=True)

    @property
    def dlpack_problem(self) -> str | None:
        """Why DLPack (strides in elements, native byte order) cannot express this field, or None if it can."""
        if not self.dtype.isnative:
            return f"its values are big-endian ({self.dtype.str}) and DLPack has no byte order"
        return super().dlpack_problem

    def host_array(self, buffer: Any) -> np.ndarray:
        """This field in a host ``buffer`` that holds the whole cloud from its first byte."""
        offset = self.offset if all(self.shape) else 0  # an empty cloud may have an empty buffer
        return np.ndarray(self.shape, self.dtype, buffer=buffer, offset=offset, strides=self.strides)


@dataclass(frozen=True)
class CloudLayout:
    """The metadata of a ``sensor_msgs/PointCloud2`` (or a ``GpuPointCloud2``) without its bytes."""

    height: int
    width: int
    point_step: int
    row_step: int
    fields: tuple[CloudField, ...]
    is_bigendian: bool = False
    is_dense: bool = False
    #: Field geometries already computed (a layout is immutable, and read streams reuse one layout).
    _geometries: dict[str, FieldGeometry] = dataclass_field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def create(cls, fields: Any, width: int, height: int = 1, point_step: int | None = None,
               row_step: int | None = None, is_dense: bool = False) -> CloudLayout:
        """A checked layout from publisher arguments.

        ``fields`` is a list of ``sensor_msgs/PointField``, a numpy structured dtype (its offsets and
        itemsize kept), or a name from ``NAMED_LAYOUTS``.  ``point_step`` defaults to the dtype's or
        named layout's, else to the end of the last field; ``row_step`` to ``width * point_step``.
        """
        if isinstance(fields, str):
            cloud_fields, natural_step = named_layout(fields)
        elif isinstance(fields, np.dtype):
            cloud_fields, natural_step = fields_from_dtype(fields)
        else:
            cloud_fields = fields_from_msgs(fields)
            natural_step = max((f.end for f in cloud_fields), default=0)
        step = natural_step if point_step is None else point_step
        layout = cls(height, width, step, width * step if row_step is None else row_step, cloud_fields,
                     False, is_dense)
        return layout.validate(layout.data_size)

    @classmethod
    def from_message(cls, msg: Any) -> CloudLayout:
        """The layout a ``PointCloud2`` or ``GpuPointCloud2`` states (not yet validated: call ``validate``)."""
        try:
            height, width = operator.index(msg.height), operator.index(msg.width)
            point_step, row_step = operator.index(msg.point_step), operator.index(msg.row_step)
        except (AttributeError, TypeError) as exc:
            raise InvalidDescriptorError(f"point cloud sizes are not integers: {exc}") from None
        return cls(height, width, point_step, row_step, fields_from_msgs(msg.fields),
                   bool(msg.is_bigendian), bool(msg.is_dense))

    def fill_message(self, msg: Any) -> None:
        """Write this layout into a ``PointCloud2`` or ``GpuPointCloud2`` (everything but the bytes)."""
        msg.height, msg.width = self.height, self.width
        msg.point_step, msg.row_step = self.point_step, self.row_step
        msg.fields = [field.to_msg() for field in self.fields]
        msg.is_bigendian, msg.is_dense = self.is_bigendian, self.is_dense

    @property
    def point_count(self) -> int:
        return self.height * self.width

    @property
    def is_organized(self) -> bool:
        """Organized clouds (height > 1) keep their rows: field views are (height, width)."""
        return self.height > 1

    @property
    def byte_extent(self) -> int:
        """Bytes from the first point to one past the last (0 for an empty cloud)."""
        if self.point_count == 0:
            return 0
        return (self.height - 1) * self.row_step + self.width * self.point_step

    @property
    def data_size(self) -> int:
        """Bytes of ``PointCloud2.data``: whole rows, the last row's padding included."""
        return self.height * self.row_step

    @property
    def padded_extent(self) -> int:
        """What a message carries when the block has room: whole rows (``data_size``), as PointCloud2.data does.

        An empty cloud still names one byte: a publication of nothing is not a block's content.
        """
        return max(self.data_size, 1)

    @cached_property
    def dtype(self) -> np.dtype:
        """The structured dtype of one point, as ``sensor_msgs_py.point_cloud2.read_points`` builds it (built once a
        layout; ValueError, before building it, when its values are more than ``MAX_STRUCTURED_VALUES``)."""
        return structured_dtype(self.fields, self.point_step, self.is_bigendian)

    def validate(self, byte_size: int) -> CloudLayout:
        """Raise InvalidDescriptorError naming what is wrong; return self if the cloud fits ``byte_size`` bytes."""
        return self.validate_points().validate_size(byte_size)

    def validate_points(self) -> CloudLayout:
        """The point alone: point_step in range, fields known, inside the point and apart (see ``validate``)."""
        if not 0 < self.point_step <= MAX_POINT_STEP:
            raise InvalidDescriptorError(f"point_step {self.point_step} is outside 1..{MAX_POINT_STEP} bytes")
        if not self.fields:
            raise InvalidDescriptorError("the cloud has no fields")
        self._validate_fields()
        return self

    def validate_size(self, byte_size: int) -> CloudLayout:
        """The rows and points of a layout whose point is valid: row_step and the last byte (see ``validate``)."""
        for name in ("height", "width", "row_step"):
            if getattr(self, name) < 0:
                raise InvalidDescriptorError(f"{name} {getattr(self, name)} is negative")
        if self.row_step < self.width * self.point_step:
            raise InvalidDescriptorError(f"row_step {self.row_step} is shorter than width {self.width} x point_step "
                                         f"{self.point_step} = {self.width * self.point_step} bytes")
        if self.byte_extent > byte_size:
            raise InvalidDescriptorError(
                f"{self.height} x {self.width} points of {self.point_step} bytes, rows {self.row_step} apart, "
                f"need {self.byte_extent} bytes; the buffer holds {byte_size}")
        return self

    def _validate_fields(self) -> None:
        """Each field alone, then their overlaps, then their structured-array names: every check costs the fields'
        number, never their counts, so a message's few bytes cannot buy a long check (60 overlapping fields of
        count 65,536 once expanded 3.9 million names before their overlap was seen: 15 s and 345 MiB)."""
        seen: set[str] = set()
        for field in self.fields:
            if not field.name or field.name in seen:
                raise InvalidDescriptorError(f"field name {field.name!r} is {'a duplicate' if field.name else 'empty'}: "
                                             "fields are looked up by name")
            seen.add(field.name)
            if field.datatype not in DATATYPES:
                raise InvalidDescriptorError(f"field {field.name!r} has PointField datatype {field.datatype}, "
                                             f"not one of {sorted(DATATYPES)} (INT8 .. FLOAT64)")
            if field.count < 1:
                raise InvalidDescriptorError(f"field {field.name!r} has count {field.count}; it must be at least 1")
            if field.offset < 0 or field.end > self.point_step:
                raise InvalidDescriptorError(f"field {field.name!r} spans bytes [{field.offset}, {field.end}) of a "
                                             f"{self.point_step}-byte point")
        ordered = sorted(self.fields, key=lambda f: f.offset)
        for first, second in itertools.pairwise(ordered):
            if first.end > second.offset:
                raise InvalidDescriptorError(f"field {first.name!r} [{first.offset}, {first.end}) overlaps field "
                                             f"{second.name!r} at byte {second.offset}")
        # Apart and inside the point: the fields' values number at most point_step, so the structured dtype is bounded.
        clash = structured_name_clash(self.fields)
        if clash is not None:
            raise InvalidDescriptorError(f"field {clash.name!r} gives the structured array the name {clash.name!r} "
                                         "another field already has (a field of count n > 1 is name_0 .. name_n-1)")

    def with_points(self, width: int | None = None, height: int | None = None, is_dense: bool | None = None
                    ) -> CloudLayout:
        """The layout of a message carrying ``height x width`` of this capacity's points, at the same addresses.

        Rows keep ``row_step``; a single row keeps its trailing padding, so ``row_step`` shrinks with ``width``.
        """
        width = self.width if width is None else width
        height = self.height if height is None else height
        is_dense = self.is_dense if is_dense is None else is_dense
        if not (0 <= width <= self.width and 0 <= height <= self.height):
            raise ValueError(f"{height} x {width} points do not fit a capacity of {self.height} x {self.width}")
        if (width, height, is_dense) == (self.width, self.height, self.is_dense):
            return self  # the publisher's own layout: the message it built ahead is filled with it already
        row_step = self.row_step if height > 1 else self.row_step - (self.width - width) * self.point_step
        return replace(self, width=width, height=height, row_step=row_step, is_dense=is_dense)

    def geometry(self, name: str) -> FieldGeometry:
        """Geometry of field ``name``: (height, width) organized or (width,) not, plus (count,) when count > 1."""
        known = self._geometries.get(name)
        if known is not None:
            return known
        self._geometries[name] = self._field_geometry(name)
        return self._geometries[name]

    def _field_geometry(self, name: str) -> FieldGeometry:
        field = self.field(name)
        scalar = field.wire_dtype(self.is_bigendian)
        shape, strides = self._point_axes()
        if field.count > 1:
            shape, strides = (*shape, field.count), (*strides, scalar.itemsize)
        return FieldGeometry(shape, strides, scalar, offset=field.offset, name=field.name)

    @property
    def xyz_geometry(self) -> FieldGeometry:
        """An (N, 3) float32 geometry over x, y, z; ValueError saying why when they are not laid out for one."""
        names = [f.name for f in self.fields]
        if not {"x", "y", "z"} <= set(names):
            raise ValueError(f"the cloud has no x, y and z fields (it has {names}); use .field(name)")
        x, y, z = self.field("x"), self.field("y"), self.field("z")
        f32 = np.dtype(np.float32)
        if any(f.dtype != f32 or f.count != 1 for f in (x, y, z)) or (y.offset, z.offset) != (x.offset + 4, x.offset + 8):
            raise ValueError(f"x, y, z are not consecutive float32 fields (offsets {x.offset}, {y.offset}, {z.offset}); "
                             "use .field('x'), .field('y'), .field('z')")
        if self.is_organized and self.row_step != self.width * self.point_step:
            raise ValueError(f"rows are padded (row_step {self.row_step} > {self.width} x {self.point_step}), so the "
                             "points are not one (N, 3) array; use .field('x') etc., shaped (height, width)")
        return FieldGeometry((self.point_count, 3), (self.point_step, 4), x.wire_dtype(self.is_bigendian), offset=x.offset,
                             name="xyz")

    @property
    def points_geometry(self) -> FieldGeometry:
        """All points as one structured array (``dtype``): (height, width) organized, (width,) otherwise."""
        shape, strides = self._point_axes()
        return FieldGeometry(shape, strides, self.dtype, name="points")

    def _point_axes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if self.is_organized:
            return (self.height, self.width), (self.row_step, self.point_step)
        return (self.width,), (self.point_step,)

    def field(self, name: str) -> CloudField:
        """The field called ``name``; KeyError listing the fields if there is none."""
        for field in self.fields:
            if field.name == name:
                return field
        raise KeyError(f"no field {name!r} in this cloud; its fields are {[f.name for f in self.fields]}")

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

