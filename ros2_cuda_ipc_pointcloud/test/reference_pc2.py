"""The interop reference: ``sensor_msgs_py.point_cloud2`` where ROS ships it, else the PyPI ``pointcloud2`` package.

Both implement ``read_points`` / ``create_cloud`` / ``dtype_from_fields`` with the same contract; this
module gives the tests one face of them that always speaks real ``sensor_msgs/PointCloud2`` messages.
"""

from __future__ import annotations

import array
import inspect
from typing import Any

import numpy as np
from numpy.lib.recfunctions import structured_to_unstructured
from sensor_msgs.msg import PointCloud2, PointField

try:
    from sensor_msgs_py import point_cloud2 as pc2

    NAME = "sensor_msgs_py"
except ImportError:
    import pointcloud2 as pc2  # type: ignore[no-redef]

    NAME = "pointcloud2"

_CREATE_TAKES_STEP = "step" in inspect.signature(pc2.create_cloud).parameters or \
    "point_step" in inspect.signature(pc2.create_cloud).parameters


def dtype_from_fields(fields: list[PointField], point_step: int) -> np.dtype:
    return pc2.dtype_from_fields(fields, point_step=point_step)


def read_points(msg: PointCloud2) -> np.ndarray:
    """The structured points of ``msg``, organized clouds flattened, as the reference reads them."""
    return pc2.read_points(msg)


def read_points_numpy(msg: PointCloud2, field_names: list[str]) -> np.ndarray:
    """(N, len(field_names)) values of fields that share one type (``read_points_numpy``'s contract)."""
    if hasattr(pc2, "read_points_numpy"):
        return pc2.read_points_numpy(msg, field_names=field_names)
    return structured_to_unstructured(pc2.read_points(msg, field_names=field_names))


def create_cloud(fields: list[PointField], points: np.ndarray, header: Any = None) -> PointCloud2 | None:
    """A real ``sensor_msgs/PointCloud2`` made by the reference from structured ``points``.

    None when the reference cannot express this point_step (sensor_msgs_py of Humble packs points).
    """
    step = points.dtype.itemsize
    if _CREATE_TAKES_STEP:
        keyword = "step" if "step" in inspect.signature(pc2.create_cloud).parameters else "point_step"
        made = pc2.create_cloud(header or PointCloud2().header, fields, points, **{keyword: step})
    elif pc2.dtype_from_fields(fields).itemsize == step:
        made = pc2.create_cloud(header or PointCloud2().header, fields, points)
    else:
        return None
    if isinstance(made, PointCloud2):
        return made
    msg = PointCloud2()
    msg.header = header or msg.header
    msg.height, msg.width, msg.point_step, msg.row_step = made.height, made.width, made.point_step, made.row_step
    msg.fields = [PointField(name=f.name, offset=f.offset, datatype=f.datatype, count=f.count) for f in made.fields]
    msg.is_bigendian, msg.is_dense = bool(made.is_bigendian), bool(made.is_dense)
    msg.data = array.array("B", bytes(made.data))
    return msg


def reads_padded_rows() -> bool:
    """Whether ``read_points`` honours ``row_step`` (Humble's ``sensor_msgs_py`` reads rows as if packed)."""
    msg = PointCloud2(height=2, width=2, point_step=4, row_step=12, is_dense=True)
    msg.fields = [PointField(name="v", offset=0, datatype=PointField.UINT32, count=1)]
    msg.data = array.array("B", np.array([1, 2, 99, 3, 4, 99], np.uint32).tobytes())
    try:
        return [int(v) for v in pc2.read_points(msg)["v"]] == [1, 2, 3, 4]
    except ValueError:
        return False
