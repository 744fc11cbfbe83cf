"""``PointCloudReader``: ``GpuPointCloud2`` messages to leased point-cloud views."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ros2_cuda_ipc_core import Reader, ReadHandle, TypedReader
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

from .layout import CloudLayout
from .layout_cache import LayoutCache
from .view import PointCloudView


class PointCloudReader(TypedReader[CloudLayout, GpuPointCloud2, PointCloudView]):
    """Reads ``GpuPointCloud2`` messages; share one ``Reader`` with other typed readers to share pool imports.

    Every layout rule is checked against the descriptor's ``byte_size`` before any lease is taken
    (a layout seen before is not parsed again: see ``LayoutCache``).
    """

    message_type = GpuPointCloud2

    def __init__(self, reader: Reader | None = None, allowed_uids: Iterable[int] | None = None, *,
                 node: Any = None, topic: str | None = None, diagnostics: bool = True) -> None:
        super().__init__(reader, allowed_uids, node=node, topic=topic, diagnostics=diagnostics)
        self.layouts = LayoutCache()

    def layout_of(self, msg: GpuPointCloud2) -> CloudLayout:
        return self.layouts.layout_of(msg, int(msg.core.byte_size))

    def view_of(self, handle: ReadHandle, layout: CloudLayout, msg: GpuPointCloud2, stream: int) -> PointCloudView:
        return PointCloudView(handle, layout, msg.header, stream)
