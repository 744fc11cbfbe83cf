"""Typed zero-copy point clouds over ros2_cuda_ipc: ``PointCloudPublisher``, ``PointCloudReader``, per-field views,
and the sensor_msgs/PointCloud2 bridge."""

import ros2_cuda_ipc_core  # noqa: F401  (first: in an executable, a stop from here on is a clean exit 0: core.startup)

from .bridge import to_pointcloud2_msg
from .fields import DATATYPES, CloudField, fields_from_dtype
from .frame import CloudFrame
from .layout import MAX_POINT_STEP, CloudLayout, FieldGeometry
from .named_layouts import NAMED_LAYOUTS
from .publisher import PointCloudPublisher, publish_pointcloud2_msg
from .reader import PointCloudReader
from .repack import repack
from .subscription import CloudTwinUpload, PointCloudSubscription
from .view import PointCloudView
from .voxel import numpy_voxel_downsample, voxel_downsample

__all__ = [
    "DATATYPES",
    "MAX_POINT_STEP",
    "NAMED_LAYOUTS",
    "CloudField",
    "CloudFrame",
    "CloudLayout",
    "CloudTwinUpload",
    "FieldGeometry",
    "PointCloudPublisher",
    "PointCloudReader",
    "PointCloudSubscription",
    "PointCloudView",
    "fields_from_dtype",
    "numpy_voxel_downsample",
    "publish_pointcloud2_msg",
    "repack",
    "to_pointcloud2_msg",
    "voxel_downsample",
]
