"""``ImageView``: a read-only, leased image from a ``GpuImage``, with exactly its shape and strides."""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import ReadHandle

from .array_protocols import ImageArrayProtocols
from .layout import ImageLayout


class ImageView(ImageArrayProtocols):
    """What ``ImageReader.read`` returns.  ``array`` is numpy (host) or a ``CudaArray`` (CUDA);
    DLPack, the CUDA array interface and ``np.asarray`` all work on the view itself."""

    def __init__(self, handle: ReadHandle, layout: ImageLayout, header: Any, stream: int) -> None:
        self.handle = handle
        self.layout = layout
        self.header = header
        self.stream = stream
        self.array: Any = handle.view(layout.shape, layout.dtype, layout.strides)

    @property
    def memory(self) -> str:
        return self.handle.memory

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.memory != "host":
            raise TypeError("a CUDA image has no host array; use DLPack (torch.from_dlpack) or to_image_msg()")
        return self.array if dtype is None else self.array.astype(dtype)

    def close(self) -> None:
        """Give up the view's lease (tensors made from it keep theirs until they are freed)."""
        self.array = None
        self.handle.close()

    def __enter__(self) -> ImageView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ImageView(shape={self.shape}, strides={self.strides}, dtype={self.dtype}, "
                f"encoding={self.encoding!r}, memory={self.memory!r})")
