"""The array protocols an image object exposes for its ``array`` and ``layout``: one obvious way in."""

from __future__ import annotations

from typing import Any

import numpy as np

from .layout import ImageLayout


class ImageArrayProtocols:
    """DLPack, the CUDA Array Interface, shape, strides and dtype, delegated to ``self.array`` / ``self.layout``."""

    array: Any
    layout: ImageLayout

    @property
    def shape(self) -> tuple[int, int, int]:
        """(rows, cols, channels)."""
        return self.layout.shape

    @property
    def strides(self) -> tuple[int, int, int]:
        """Byte strides of (rows, cols, channels)."""
        return self.layout.strides

    @property
    def dtype(self) -> np.dtype:
        return self.layout.dtype

    @property
    def encoding(self) -> str:
        return self.layout.encoding

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.array.__cuda_array_interface__
