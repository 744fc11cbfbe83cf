"""``TensorView``: a read-only, leased tensor from a ``GpuTensor``, with exactly its shape, strides and type."""

from __future__ import annotations

from typing import Any

from ros2_cuda_ipc_core import ReadHandle, TypedView

from .layout import TensorLayout
from .tensor_array import TensorArray


class TensorView(TypedView[TensorLayout], TensorArray):
    """What ``TensorReader.read`` returns: ``torch.from_dlpack(view)``, ``cupy.asarray(view)``, ``np.asarray(view)``
    (host; not for bfloat16 / float8, which numpy lacks) all see the very same memory.

    The lease lives until the view is closed and every array made from it is gone.
    """

    array_name = "tensor"

    def __init__(self, handle: ReadHandle, layout: TensorLayout, header: Any, stream: int) -> None:
        super().__init__(handle, layout, header, stream)
        self.array: Any = handle.view(layout.shape, layout.dtype, layout.strides, layout.offset)

    def close(self) -> None:
        """Give up the view's lease (tensors made from it keep theirs until they are freed)."""
        self.array = None
        super().close()
