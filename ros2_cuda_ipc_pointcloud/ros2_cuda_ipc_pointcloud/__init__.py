"""Typed zero-copy point clouds over ros2_cuda_ipc and the sensor_msgs/PointCloud2 bridge."""

from .fields import DATATYPES, CloudField, fields_from_dtype
from .layout import MAX_POINT_STEP, CloudLayout, FieldGeometry
from .named_layouts import NAMED_LAYOUTS
from .repack import repack

__all__ = [
    "DATATYPES",
    "MAX_POINT_STEP",
    "NAMED_LAYOUTS",
    "CloudField",
    "CloudLayout",
    "FieldGeometry",
    "fields_from_dtype",
    "repack",
]
