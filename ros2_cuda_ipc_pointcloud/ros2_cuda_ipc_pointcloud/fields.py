"""``CloudField``: one ``sensor_msgs/PointField``, and its conversions to and from numpy dtypes.

A point is ``point_step`` bytes; each field is ``count`` values of one scalar type at a byte
offset.  The structured dtype follows ``sensor_msgs_py.point_cloud2.dtype_from_fields``
(a field with ``count > 1`` becomes ``name_0 .. name_{count-1}``; itemsize = point_step), so
``view.structured`` is what ``read_points`` would give.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_core import InvalidDescriptorError

#: PointField datatype constants and their scalar types (sensor_msgs/PointField.msg).
DATATYPES: dict[int, np.dtype] = {
    PointField.INT8: np.dtype(np.int8),
    PointField.UINT8: np.dtype(np.uint8),
    PointField.INT16: np.dtype(np.int16),
    PointField.UINT16: np.dtype(np.uint16),
    PointField.INT32: np.dtype(np.int32),
    PointField.UINT32: np.dtype(np.uint32),
    PointField.FLOAT32: np.dtype(np.float32),
    PointField.FLOAT64: np.dtype(np.float64),
}
_DATATYPE_OF = {dtype.char: code for code, dtype in DATATYPES.items()}


@dataclass(frozen=True)
class CloudField:
    """``count`` values of PointField ``datatype`` at byte ``offset`` of every point."""

    name: str
    offset: int
    datatype: int
    count: int = 1

    @property
    def dtype(self) -> np.dtype:
        """The scalar type, in this machine's byte order (raises for an unknown datatype)."""
        try:
            return DATATYPES[self.datatype]
        except KeyError:
            raise InvalidDescriptorError(
                f"field {self.name!r} has PointField datatype {self.datatype}, not one of "
                f"{sorted(DATATYPES)} (INT8 .. FLOAT64)") from None

    def wire_dtype(self, is_bigendian: bool) -> np.dtype:
        """The scalar type in the cloud's byte order (``is_bigendian`` of the message)."""
        return self.dtype.newbyteorder(">" if is_bigendian else "<") if self.dtype.itemsize > 1 else self.dtype

    @property
    def byte_size(self) -> int:
        return self.dtype.itemsize * self.count

    @property
    def end(self) -> int:
        """One past the field's last byte within a point."""
        return self.offset + self.byte_size

    def to_msg(self) -> PointField:
        return PointField(name=self.name, offset=self.offset, datatype=self.datatype, count=self.count)

    @classmethod
    def from_msg(cls, field: Any) -> CloudField:
        """From a ``sensor_msgs/PointField`` or anything with its four attributes."""
        try:
            return cls(str(field.name), operator.index(field.offset), operator.index(field.datatype),
                       operator.index(field.count))
        except (AttributeError, TypeError) as exc:
            raise InvalidDescriptorError(f"point field {field!r} is not a PointField: {exc}") from None


def fields_from_msgs(fields: Iterable[Any]) -> tuple[CloudField, ...]:
    return tuple(CloudField.from_msg(field) for field in fields)


def fields_from_dtype(dtype: Any) -> tuple[tuple[CloudField, ...], int]:
    """The fields of a numpy structured dtype and its itemsize (the point_step); offsets are kept.

    A field may be a scalar of a PointField type or a 1-D array of one (``count``).
    """
    dtype = np.dtype(dtype)
    if dtype.fields is None:
        raise ValueError(f"dtype {dtype} is not a structured dtype (give names, formats and offsets)")
    fields = []
    for name, (field_dtype, offset, *_) in dtype.fields.items():
        base, count = field_dtype, 1
        if field_dtype.subdtype is not None:
            base, shape = field_dtype.subdtype
            if len(shape) != 1:
                raise ValueError(f"field {name!r} has shape {shape}; a PointField holds a 1-D count of values")
            count = shape[0]
        if not base.isnative:
            raise ValueError(f"field {name!r} is {base.str}: give fields in this machine's byte order")
        if base.char not in _DATATYPE_OF or base.fields is not None:
            raise ValueError(f"field {name!r} is {base}, which no PointField datatype holds "
                             f"(int8..int32, uint8..uint32, float32, float64)")
        fields.append(CloudField(name, offset, _DATATYPE_OF[base.char], count))
    return tuple(fields), dtype.itemsize


#: Values of one point a structured dtype may name (its cost grows with them: 0.5 s and 15 MiB for 65,536).  PCL's
#: largest descriptor, ShapeContext1980, has 1,989; a field of more is read through ``view.field(name)``.
MAX_STRUCTURED_VALUES = 4096


def structured_dtype(fields: Iterable[CloudField], point_step: int, is_bigendian: bool = False) -> np.dtype:
    """The ``read_points`` dtype: one entry per value (``name_i`` for ``count > 1``), itemsize ``point_step``.

    ValueError, before any name is made, when the fields hold more than ``MAX_STRUCTURED_VALUES`` values.
    """
    fields = tuple(fields)
    values = sum(field.count for field in fields)
    if values > MAX_STRUCTURED_VALUES:
        raise ValueError(f"a point of {values} values is more than a structured array names "
                         f"({MAX_STRUCTURED_VALUES}); read its fields with .field(name)")
    names: list[str] = []
    formats: list[np.dtype] = []
    offsets: list[int] = []
    for field in fields:
        scalar = field.wire_dtype(is_bigendian)
        for index in range(field.count):
            names.append(f"{field.name}_{index}" if field.count > 1 else field.name)
            formats.append(scalar)
            offsets.append(field.offset + index * scalar.itemsize)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": point_step})


def structured_name_clash(fields: Iterable[CloudField]) -> CloudField | None:
    """A field whose name is one ``structured_dtype`` gives another field's value, found without making any name.

    A field of count n > 1 names its values ``name_0 .. name_{n-1}``.  Two such names of differently named fields
    never meet (an index has no ``_``), so a clash is a field of count 1 called ``<stem>_<i>`` where field ``stem``
    has a count above ``i`` (``i`` written as ``str`` writes it); fields with one name are assumed distinct.
    """
    fields = tuple(fields)
    counts = {field.name: field.count for field in fields if field.count > 1}
    for field in fields:
        stem, underscore, index = field.name.rpartition("_")
        if field.count > 1 or not underscore or stem not in counts:
            continue
        count = counts[stem]
        if index.isascii() and index.isdigit() and len(index) <= len(str(count)) and str(int(index)) == index \
                and int(index) < count:
            return field
    return None
