"""Point layouts by name: the plain PCL ones and the Ouster, Velodyne and Livox driver layouts.

Each is (fields, point_step) exactly as the drivers publish them, so their clouds travel unchanged.
"""

from __future__ import annotations

from sensor_msgs.msg import PointField

from .fields import CloudField

_F32, _U32, _U16, _U8 = PointField.FLOAT32, PointField.UINT32, PointField.UINT16, PointField.UINT8


def _xyz(*extra: CloudField) -> tuple[CloudField, ...]:
    return (CloudField("x", 0, _F32), CloudField("y", 4, _F32), CloudField("z", 8, _F32), *extra)


#: name -> (fields, point_step)
NAMED_LAYOUTS: dict[str, tuple[tuple[CloudField, ...], int]] = {
    "xyz": (_xyz(), 12),
    "xyzi": (_xyz(CloudField("intensity", 12, _F32)), 16),
    # PCL's PointXYZRGB: the colour is a uint32 0x00RRGGBB packed into a float32 field named rgb.
    "xyzrgb": (_xyz(CloudField("rgb", 12, _F32)), 16),
    # ouster_ros PointOS (bytes 12-15 are PCL's padding after z).
    "ouster": (_xyz(CloudField("intensity", 16, _F32), CloudField("t", 20, _U32),
                    CloudField("reflectivity", 24, _U16), CloudField("ring", 26, _U16),
                    CloudField("ambient", 28, _U16), CloudField("range", 32, _U32)), 48),
    # velodyne_pointcloud PointXYZIRT, packed: time is not 4-byte aligned.
    "velodyne": (_xyz(CloudField("intensity", 12, _F32), CloudField("ring", 16, _U16),
                      CloudField("time", 18, _F32)), 22),
    # livox_ros_driver2 point, packed.
    "livox": (_xyz(CloudField("intensity", 12, _F32), CloudField("tag", 16, _U8), CloudField("line", 17, _U8)), 18),
}


def named_layout(name: str) -> tuple[tuple[CloudField, ...], int]:
    """(fields, point_step) of a named layout; ValueError listing the names for anything else."""
    try:
        return NAMED_LAYOUTS[name]
    except KeyError:
        raise ValueError(f"unknown point layout {name!r}; named layouts are {sorted(NAMED_LAYOUTS)}") from None
