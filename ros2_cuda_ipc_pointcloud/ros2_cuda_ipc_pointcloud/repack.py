"""Repacking a cloud's points from one layout into another on the host, field by field, by name.

The bridge uses it when a ``sensor_msgs/PointCloud2`` is laid out differently from the publisher's
points (another point_step, field order, padding or byte order): one pass over the host bytes
before the single upload, instead of refusing the message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import InvalidDescriptorError

from .layout import CloudLayout


def repack(data: Any, source: CloudLayout, target: CloudLayout) -> np.ndarray:
    """``target.data_size`` bytes holding ``source``'s points in ``target``'s layout; padding is zeros.

    Every target field is taken from the source field of the same name and count, converted by value
    within its kind (float64 -> float32, uint8 -> uint16, ...; never float -> int).  Source fields the
    target lacks are dropped.  Both layouts must have the same height and width.
    """
    if (source.height, source.width) != (target.height, target.width):
        raise ValueError(f"cannot repack {source.height} x {source.width} points into {target.height} x {target.width}")
    src = np.frombuffer(data, dtype=np.uint8)
    source.validate(len(src))
    out = np.zeros(target.data_size, dtype=np.uint8)
    if target.point_count == 0:
        return out
    for field in target.fields:
        if field.name not in source.field_names:
            raise InvalidDescriptorError(f"the cloud has no field {field.name!r}, which this publisher's points carry "
                                         f"(the cloud has {list(source.field_names)})")
        if source.field(field.name).count != field.count:
            raise InvalidDescriptorError(f"field {field.name!r} has count {source.field(field.name).count} in the cloud, "
                                         f"{field.count} in this publisher's points")
        wanted, given = target.geometry(field.name), source.geometry(field.name)
        try:
            np.copyto(wanted.host_array(out), given.host_array(src), casting="same_kind")
        except TypeError:
            raise InvalidDescriptorError(f"field {field.name!r} is {given.dtype.name} in the cloud and "
                                         f"{wanted.dtype.name} in this publisher's points: not convertible") from None
    return out
