"""Where a user's array lives: address, byte-strided layout and device, for numpy, CAI and DLPack objects alike.

The typed publishers' ``publish_array`` and the views' strided copies read user arrays through it,
so any torch / cupy / numba / numpy array is accepted without importing any of them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..memory.dlpack import read_export
from ..memory.dlpack_dtype import DLPackDType
from .layout import StridedLayout

_KDL_CPU = 1


@dataclass(frozen=True)
class StridedSource:
    """A user's array as raw memory: ``address`` of element 0 and its :class:`StridedLayout` (offset 0)."""

    address: int
    layout: StridedLayout
    on_device: bool  #: GPU memory (CAI or a non-CPU DLPack device); else host memory
    device_id: int | None  #: the CUDA device when DLPack says so; None for host memory and CAI objects
    readonly: bool
    owner: Any  #: keep alive while the address is used

    @property
    def is_contiguous(self) -> bool:
        """Dense and C-ordered."""
        return self.layout == StridedLayout.contiguous(self.layout.shape, self.layout.dtype)


def strided_source(array: Any) -> StridedSource:
    """Describe ``array``: anything with ``__cuda_array_interface__``, ``__dlpack__`` or numpy's array protocols.

    Big-endian host data is first converted to this machine's order (one copy, only then).  A tensor of a
    type numpy has no dtype for (torch's bfloat16, float8) is read through its DLPack capsule: its layout's
    ``dtype`` is then the unsigned integer holding the bits, and ``element`` the type.
    """
    element = _numpyless_element(array)
    if element is not None:
        export = read_export(array)
        on_device = export.device[0] != _KDL_CPU
        numpyless = export.dtype if export.dtype.numpy is None else None  # the capsule's word over the attribute's
        layout = StridedLayout(export.shape, export.byte_strides, export.dtype.storage, element=numpyless)
        return StridedSource(export.address, layout, on_device, export.device[1] if on_device else None,
                             export.readonly, (array, export))
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is not None:
        dtype = np.dtype(interface["typestr"])
        shape = tuple(int(n) for n in interface["shape"])
        layout = _layout(shape, interface.get("strides"), dtype)
        ptr, readonly = interface["data"]
        return StridedSource(int(ptr), layout, True, None, bool(readonly), array)
    if hasattr(array, "__dlpack_device__") and array.__dlpack_device__()[0] != _KDL_CPU:
        from cuda.core.utils import StridedMemoryView

        view = StridedMemoryView(array, stream_ptr=-1)
        dtype = np.dtype(view.dtype)
        strides = None if view.strides is None else tuple(s * dtype.itemsize for s in view.strides)
        layout = _layout(tuple(view.shape), strides, dtype)
        return StridedSource(int(view.ptr), layout, True, int(view.device_id), bool(view.readonly), (array, view))
    host = np.asarray(array)
    if sys.byteorder == "little" and host.dtype.byteorder == ">":
        host = host.astype(host.dtype.newbyteorder("="))
    layout = StridedLayout(tuple(host.shape), tuple(host.strides), host.dtype)
    return StridedSource(int(host.ctypes.data), layout, False, None, not host.flags.writeable, host)


def _numpyless_element(array: Any) -> DLPackDType | None:
    """The type of a DLPack producer's elements (by its ``dtype`` attribute) when numpy has none for it."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or isinstance(array, np.ndarray) or not hasattr(array, "__dlpack__"):
        return None
    try:
        element = DLPackDType.of(dtype)
    except ValueError:
        return None
    return element if element.numpy is None else None


def _layout(shape: tuple[int, ...], strides: Any, dtype: np.dtype) -> StridedLayout:
    if not strides:
        return StridedLayout.contiguous(shape, dtype)
    return StridedLayout(shape, tuple(int(s) for s in strides), dtype)
