"""``ImageView``: a read-only, leased image from a ``GpuImage``, with exactly its shape and strides."""

from __future__ import annotations

from typing import Any

from ros2_cuda_ipc_core import ArrayProtocols, ReadHandle, TypedView

from .layout import ImageLayout


class ImageView(TypedView[ImageLayout], ArrayProtocols):
    """What ``ImageReader.read`` returns.  ``array`` is numpy (host) or a ``CudaArray`` (CUDA);
    DLPack, the CUDA array interface and ``np.asarray`` all work on the view itself."""

    array_name = "image"

    def __init__(self, handle: ReadHandle, layout: ImageLayout, header: Any, stream: int) -> None:
        super().__init__(handle, layout, header, stream)
        self.array: Any = handle.view(layout.shape, layout.dtype, layout.strides)

    @property
    def array_layout(self) -> ImageLayout:
        return self.layout

    @property
    def encoding(self) -> str:
        return self.layout.encoding

    def close(self) -> None:
        """Give up the view's lease (tensors made from it keep theirs until they are freed)."""
        self.array = None
        super().close()

    def __repr__(self) -> str:
        return (f"ImageView(shape={self.shape}, strides={self.strides}, dtype={self.dtype}, "
                f"encoding={self.encoding!r}, memory={self.memory!r})")
