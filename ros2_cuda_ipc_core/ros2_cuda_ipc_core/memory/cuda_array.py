"""``CudaArray``: a strided view of CUDA memory that PyTorch, CuPy, Numba and CV-CUDA take without a copy.

It speaks both DLPack (``__dlpack__`` / ``__dlpack_device__``, versioned capsules with the
read-only flag) and the CUDA Array Interface v3.  A reader's view orders the consumer's
stream after the producer's work whenever the consumer names a stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from .dlpack import KDL_CUDA, make_capsule
from .dlpack_dtype import DLPackDType
from .views import check_layout

T = TypeVar("T")

#: Streams as the DLPack protocol names them for CUDA.
_LEGACY_DEFAULT, _NO_SYNC = 1, -1


class CudaArray:
    """A typed, strided window on device memory, alive as long as ``owner`` is."""

    __slots__ = ("__weakref__", "_order_on", "_owner", "device_id", "dtype", "ptr", "readonly", "shape", "strides")

    def __init__(self, ptr: int, shape: Sequence[int], strides: Sequence[int] | None, dtype: Any, device_id: int,
                 readonly: bool, owner: Any, order_on: Callable[[int], None] | None = None) -> None:
        self.dtype = np.dtype(dtype)
        self.shape, self.strides = check_layout(shape, strides, self.dtype.itemsize, 0, 1 << 62)
        self.ptr = ptr
        self.device_id = device_id
        self.readonly = readonly
        self._owner = owner
        self._order_on = order_on

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CAI v3.  ``stream`` is None: the wait was enqueued on the reader's stream when it read."""
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, self.readonly), "version": 3,
                "strides": self.strides, "stream": None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CUDA, self.device_id)

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None,
                   dlpack_dtype: DLPackDType | None = None) -> Any:
        """Export as a DLPack capsule; the consumer's ``stream`` is made to wait for the producer first.

        ``dlpack_dtype`` (not part of the protocol) types the elements as what numpy cannot name, the same size
        as :attr:`dtype`: a block's bfloat16, stored as uint16, goes out as bfloat16.
        """
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"this array lives on CUDA device {self.device_id}; it cannot be exported to "
                              f"{tuple(dl_device)} without a copy")
        if copy:
            raise BufferError("CudaArray exports zero-copy views only (copy=True asked for a copy)")
        if stream == 0:
            raise ValueError("stream=0 is ambiguous for CUDA under the DLPack protocol: pass 1 for the legacy "
                             "default stream, 2 for per-thread, or a stream handle")
        consumer = _LEGACY_DEFAULT if stream is None else int(stream)
        if consumer != _NO_SYNC and self._order_on is not None:
            self._order_on(consumer)
        versioned = max_version is not None and max_version[0] >= 1
        if dlpack_dtype is not None and dlpack_dtype.itemsize != self.dtype.itemsize:
            raise BufferError(f"{dlpack_dtype} elements are not the size of this array's {self.dtype}")
        return make_capsule(self, self.ptr, self.__dlpack_device__(), self.shape, self.strides,
                            self.dtype if dlpack_dtype is None else dlpack_dtype, versioned, self.readonly)

    def kept(self, importer: Callable[[Any], T]) -> T:
        """``importer(self)``, made once per address, layout and importer while its memory lives (see
        :meth:`ArrayProtocols.kept <ros2_cuda_ipc_core.typed.arrays.ArrayProtocols.kept>`)."""
        kept_import = getattr(self._owner, "kept_import", None)
        return importer(self) if kept_import is None else kept_import(self, importer)

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "writable"
        return f"CudaArray(shape={self.shape}, dtype={self.dtype}, device={self.device_id}, {mode}, ptr=0x{self.ptr:x})"
