"""``TensorReader``: ``GpuTensor`` messages to leased tensor views."""

from __future__ import annotations

from ros2_cuda_ipc_core import ReadHandle, TypedReader
from ros2_cuda_ipc_msgs.msg import GpuTensor

from .layout import TensorLayout
from .view import TensorView


class TensorReader(TypedReader[TensorLayout, GpuTensor, TensorView]):
    """Reads ``GpuTensor`` messages; share one ``Reader`` with other typed readers to share pool imports.

    Every field is checked against the descriptor's ``byte_size`` before any lease is taken.
    """

    message_type = GpuTensor

    def layout_of(self, msg: GpuTensor) -> TensorLayout:
        return TensorLayout.from_message(msg)

    def view_of(self, handle: ReadHandle, layout: TensorLayout, msg: GpuTensor, stream: int) -> TensorView:
        return TensorView(handle, layout, msg.header, stream)
