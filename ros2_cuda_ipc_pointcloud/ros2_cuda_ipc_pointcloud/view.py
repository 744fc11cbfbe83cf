"""``PointCloudView``: a read-only, leased point cloud from a ``GpuPointCloud2``, seen field by field."""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import StreamLike, TypedView

from .field_views import FieldAccess
from .layout import CloudLayout


class PointCloudView(TypedView[CloudLayout], FieldAccess):
    """What ``PointCloudReader.read`` returns: ``field(name)`` / ``xyz`` views of the very same memory.

    Field views, the structured array and tensors made from them hold the lease while they live;
    ``close()`` (or leaving the ``with`` block) gives up the view's own share.
    """

    @property
    def structured(self) -> np.ndarray:
        """Host clouds: the points as ``read_points`` types them (itemsize = point_step), without a copy.

        Shaped (height, width) for organized clouds and (width,) otherwise, like ``field()``.  A point of more than
        ``fields.MAX_STRUCTURED_VALUES`` values (4,096) is a ValueError: its fields are read with ``field(name)``.
        """
        if self.memory != "host":
            raise TypeError("a CUDA point cloud has no host structured array; use field(name) / xyz (DLPack, CAI), "
                            "copy_field(), or to_pointcloud2_msg() for one download")
        return self.array_view(self.layout.points_geometry, "points").array

    def copy_field(self, name: str, out: Any, stream: StreamLike = None) -> None:
        """Copy field ``name`` into ``out`` (numpy, DLPack or CAI; host or device; its shape) in one strided copy.

        The way to reach a field DLPack cannot express (a packed point's unaligned ``time``, say)
        as a dense array.  CUDA copies run on ``stream`` (default: the read's) and are done on return.
        """
        self.copy_out(self.layout.geometry(name), out, stream)

    def __repr__(self) -> str:
        return (f"PointCloudView({self.height} x {self.width} points of {self.point_step} bytes, "
                f"fields {list(self.field_names)}, memory={self.memory!r})")
