"""The array protocols of a typed array in a block: DLPack, the CUDA Array Interface and numpy, one obvious way in.

``ArrayProtocols`` is the mixin (images are arrays themselves); ``ArrayView`` is one array of a
block, such as one field of a point cloud.  Either holds the numpy array or :class:`CudaArray` it
wraps, and that object holds the block's lease: so does every DLPack capsule, CAI consumer and
numpy array made from it, for as long as it lives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..errors import Ros2CudaIpcError
from ..memory.dlpack import host_capsule
from .layout import StridedLayout

T = TypeVar("T")


class ArrayProtocols:
    """``shape``, byte ``strides``, ``dtype``, DLPack, CUDA Array Interface and ``__array__`` of ``self.array``.

    Subclasses set ``array`` (numpy for host memory, ``CudaArray`` for CUDA; None once closed) and
    provide ``array_layout`` and ``array_name`` (what error messages call the array).
    """

    array: Any
    array_name: str = "this array"

    @property
    def array_layout(self) -> StridedLayout:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array_layout.shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides."""
        return self.array_layout.strides

    @property
    def dtype(self) -> np.dtype:
        return self.array_layout.dtype

    @property
    def ndim(self) -> int:
        return self.array_layout.ndim

    def _live_array(self) -> Any:
        if self.array is None:
            raise Ros2CudaIpcError(f"{self.array_name} is closed")
        return self.array

    def __dlpack__(self, **kwargs: Any) -> Any:
        """A DLPack capsule; BufferError naming the array when its offset or strides are not whole elements."""
        problem = self.array_layout.dlpack_problem
        if problem is not None:
            raise BufferError(f"{self.array_name} cannot be a DLPack view: {problem} (DLPack strides count "
                              "elements); read it through __cuda_array_interface__ or copy it out with a strided copy")
        element = self.array_layout.element
        if element is None:
            return self._live_array().__dlpack__(**kwargs)
        array = self._live_array()  # numpy or CudaArray of the bits: exported under the elements' own type
        if isinstance(array, np.ndarray):
            return host_capsule(array, element, **kwargs)
        return array.__dlpack__(**kwargs, dlpack_dtype=element)

    def kept(self, importer: Callable[[Any], T]) -> T:
        """``importer(view)`` (``torch.from_dlpack``, ``cupy.from_dlpack``) without a DLPack import per frame: the
        result is made once per block, layout and importer, and kept by this process.

        It is valid **only while this view is open** and on the stream the read was ordered on (the
        subscription's ``stream``): it holds no lease and orders no other stream.  A tensor that must outlive
        the ``with`` block, or be used on another stream, comes from ``importer(view)``, which holds the lease
        and orders that stream.  Host memory (and types DLPack cannot name as they are) import every time.
        """
        array = self._live_array()
        if isinstance(array, np.ndarray) or self.array_layout.element is not None:
            return importer(self)
        return array.kept(importer)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._live_array().__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CAI v3 (byte strides, any alignment); AttributeError for host memory, as consumers expect, and for
        a type CAI cannot name (bfloat16, float8: consumers then try DLPack)."""
        element = self.array_layout.element
        if element is not None:
            raise AttributeError(f"{self.array_name} holds {element}, which the CUDA array interface has no typestr "
                                 "for; use DLPack (torch.from_dlpack)")
        return self._live_array().__cuda_array_interface__

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self._live_array()
        element = self.array_layout.element
        if element is not None:
            raise TypeError(f"{self.array_name} cannot be a numpy array: {element.numpy_refusal}")
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{self.array_name} is CUDA memory and has no host array; use DLPack (torch.from_dlpack), "
                            "the CUDA array interface, or copy it out")
        if copy:
            return np.array(array, dtype=dtype, copy=True)
        return array if dtype is None else array.astype(dtype)


class ArrayView(ArrayProtocols):
    """One typed array of a borrowed or leased block (writable from a frame, read-only from a view)."""

    def __init__(self, array: Any, layout: StridedLayout, name: str) -> None:
        self.array = array
        self.layout = layout
        self.array_name = name

    @property
    def array_layout(self) -> StridedLayout:
        return self.layout

    @property
    def memory(self) -> str:
        """'host' or 'cuda'."""
        return "host" if isinstance(self.array, np.ndarray) else "cuda"

    def __repr__(self) -> str:
        return (f"ArrayView({self.array_name!r}, shape={self.shape}, strides={self.strides}, dtype={self.dtype}, "
                f"offset={self.layout.offset}, memory={self.memory!r})")
