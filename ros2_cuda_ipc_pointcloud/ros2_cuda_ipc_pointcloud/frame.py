"""``CloudFrame``: a borrowed, writable point cloud in a pool block, published in place."""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import ArrayView, StreamLike, StridedLayout, TypedFrame
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

from .field_views import FieldAccess
from .layout import CloudLayout


class CloudFrame(TypedFrame[CloudLayout, GpuPointCloud2], FieldAccess):
    """A cloud of the publisher's capacity to fill through ``field(name)`` / ``xyz`` / ``data``, then ``publish()``.

    Leaving a ``with`` block unpublished gives the block back.
    """

    @property
    def data(self) -> ArrayView:
        """The whole cloud as bytes (``data_size`` uint8, padding included): for kernels that write whole points."""
        return self.array_view(StridedLayout.contiguous((self.layout.data_size,), np.uint8), "cloud bytes")

    def publish(self, stream: StreamLike = None, header: Any = None, width: int | None = None,
                height: int | None = None, is_dense: bool = False) -> GpuPointCloud2:
        """Publish the first ``height`` x ``width`` points (default: all) once ``stream``'s work so far is done.

        Unorganized clouds say here how many of the capacity's points this message carries.
        """
        layout = self.layout.with_points(width, height, is_dense)
        return self.publisher.publish_block(self.block, layout, stream, header)
