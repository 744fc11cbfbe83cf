"""``TensorArray``: what a tensor frame and a tensor view share on top of the typed layer's array protocols."""

from __future__ import annotations

from ros2_cuda_ipc_core import ArrayProtocols, DLPackDType

from .layout import TensorLayout


class TensorArray(ArrayProtocols):
    """DLPack, CAI and numpy of a tensor in a block, and its tensor attributes.

    ``dtype`` is numpy's (for bfloat16 and float8, which numpy lacks, the unsigned integer holding their
    bits: ``array`` is then a view of those bits); ``dlpack_dtype`` is the type itself.  ``strides`` are
    bytes, as numpy counts them; ``element_strides`` count elements, as the message and torch do.
    """

    layout: TensorLayout

    @property
    def array_layout(self) -> TensorLayout:
        return self.layout

    @property
    def dlpack_dtype(self) -> DLPackDType:
        return self.layout.dlpack_dtype

    @property
    def element_strides(self) -> tuple[int, ...]:
        return self.layout.element_strides

    @property
    def dim_names(self) -> tuple[str, ...]:
        return self.layout.dim_names

    def __repr__(self) -> str:
        names = f", dim_names={self.dim_names}" if self.dim_names else ""
        return (f"{type(self).__name__}(shape={self.shape}, element_strides={self.element_strides}, "
                f"dtype={self.dlpack_dtype}{names}, memory={self.memory!r})")

    @property
    def memory(self) -> str:
        raise NotImplementedError
