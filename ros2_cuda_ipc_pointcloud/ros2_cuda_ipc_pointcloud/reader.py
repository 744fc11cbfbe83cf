"""``PointCloudReader``: ``GpuPointCloud2`` messages to leased point-cloud views."""

from __future__ import annotations

from ros2_cuda_ipc_core import ReadHandle, TypedReader
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

from .layout import CloudLayout
from .view import PointCloudView


class PointCloudReader(TypedReader[CloudLayout, GpuPointCloud2, PointCloudView]):
    """Reads ``GpuPointCloud2`` messages; share one ``Reader`` with other typed readers to share pool imports.

    Every layout rule is checked against the descriptor's ``byte_size`` before any lease is taken.
    """

    def layout_of(self, msg: GpuPointCloud2) -> CloudLayout:
        return CloudLayout.from_message(msg).validate(int(msg.core.byte_size))

    def view_of(self, handle: ReadHandle, layout: CloudLayout, msg: GpuPointCloud2, stream: int) -> PointCloudView:
        return PointCloudView(handle, layout, msg.header, stream)
