"""DLPack capsules for memory we do not own through a framework: plain ctypes, no compiler.

The capsule keeps a Python owner alive until the consumer's deleter runs (or until the
capsule dies unconsumed), so a torch tensor made from a reader view holds the reader's lease.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dlpack_dtype import DLPackDType
from .views import contiguous_strides

KDL_CPU, KDL_CUDA = 1, 2
READ_ONLY_FLAG = 1 << 0  # DLPACK_FLAG_BITMASK_READ_ONLY
DLPACK_VERSION = (1, 1)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


#: Everything a live capsule needs, by the address of its managed tensor.
_alive: dict[int, tuple[Any, ...]] = {}


#: Capsule memory comes from one slab of fixed slots (a fresh ctypes buffer per capsule costs a third of the
#: export at camera rates); a tensor of more dimensions than a slot holds, or a full slab, gets its own buffer.
_SLOT_BYTES = 256  # the versioned managed tensor (80 bytes) and shape and strides of up to 11 dimensions
_SLOT_COUNT = 512
_slab = ctypes.create_string_buffer(_SLOT_BYTES * _SLOT_COUNT)
_SLAB_ADDRESS = ctypes.addressof(_slab)
_free_slots = list(range(_SLOT_COUNT))


def _forget(address: int) -> None:
    """The capsule at ``address`` is done with: drop its owner, give its slot back."""
    entry = _alive.pop(address, None)
    if entry is not None and type(entry[0]) is int:
        _free_slots.append(entry[0])


@_DELETER
def _delete(address: int) -> None:
    _forget(address)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

#: PyCapsule's C layout after PyObject_HEAD: void *pointer; const char *name; ...  Read directly in the
#: destructor: C-API lookups on a capsule being deallocated were seen to fail on CPython 3.12.3.
_POINTER_OFFSET = object.__basicsize__
_NAME_OFFSET = _POINTER_OFFSET + ctypes.sizeof(ctypes.c_void_p)
_OWNING_NAMES = (b"dltensor", b"dltensor_versioned")  # renamed 'used_...' once a consumer took it


@_CAPSULE_DESTRUCTOR
def _destroy_capsule(capsule: int) -> None:
    """An unconsumed capsule still owns its tensor; a consumed one belongs to the consumer."""
    try:
        name = ctypes.c_void_p.from_address(capsule + _NAME_OFFSET).value
        if name and ctypes.string_at(name) in _OWNING_NAMES:
            _forget(ctypes.c_void_p.from_address(capsule + _POINTER_OFFSET).value or 0)
    except Exception:  # nothing may escape a destructor; the tensor then lives until exit
        return


#: The structures above as ``struct`` layouts (64-bit): DLTensor is data, device type and id, ndim, dtype code,
#: bits and lanes, shape and strides pointers, byte_offset; the managed tensors wrap it with manager_ctx and
#: deleter (and, versioned, the version before and the flags after them).
_TENSOR = "QiiiBBHQQQ"
_UNVERSIONED = struct.Struct("<" + _TENSOR + "QQ")
_VERSIONED = struct.Struct("<IIQQQ" + _TENSOR)
_DELETE_ADDRESS = ctypes.cast(_delete, ctypes.c_void_p).value
_DESTROY_ADDRESS = ctypes.cast(_destroy_capsule, ctypes.c_void_p)

# A consumer may call the deleter, or drop a capsule, while the interpreter tears its modules down (a tensor kept
# on ``sys`` or by an extension): the callbacks, the slab and the other capsules' buffers must outlive this module,
# or the consumer runs freed code at exit (a segfault, seen with numpy).  One reference each, never given back.
for _everlasting in (_delete, _destroy_capsule, _slab, _alive):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_everlasting))
del _everlasting


#: Shape and strides as ``struct`` layouts, by ndim (made once: parsing a format costs more than packing).
_ARRAYS: dict[int, struct.Struct] = {}


@functools.lru_cache(maxsize=64)
def _code_and_bits(dtype: np.dtype | DLPackDType) -> tuple[int, int]:
    """DLPack's code and bits for ``dtype`` (remembered: a capsule is made per frame); BufferError for none."""
    try:
        element = DLPackDType.of(dtype)
    except ValueError:  # complex256 (wider than DLPack's 8-bit bits field), datetimes, ...
        raise BufferError(f"dtype {dtype} has no DLPack equivalent") from None
    return element.code, element.bits


def make_capsule(owner: Any, address: int, device: tuple[int, int], shape: tuple[int, ...],
                 byte_strides: tuple[int, ...], dtype: np.dtype | DLPackDType, versioned: bool, read_only: bool) -> Any:
    """A ``dltensor`` (or ``dltensor_versioned``) capsule over ``address`` that keeps ``owner`` alive.

    ``dtype`` is numpy's, or a :class:`DLPackDType` for what numpy has no dtype for (bfloat16, float8).
    """
    if any(s % dtype.itemsize for s in byte_strides):
        raise BufferError(f"strides {byte_strides} are not whole multiples of the {dtype.itemsize}-byte element")
    ndim = len(shape)
    code, bits = _code_and_bits(dtype)
    # One buffer holds the managed tensor and its shape and strides arrays, written by struct in one go:
    # a capsule is made for every frame a framework takes, and a ctypes object per field costs several times more.
    header = _VERSIONED if versioned else _UNVERSIONED
    arrays = _ARRAYS.get(ndim) or _ARRAYS.setdefault(ndim, struct.Struct(f"<{2 * ndim}q"))
    memory: Any
    if header.size + arrays.size <= _SLOT_BYTES and _free_slots:
        try:
            memory = _free_slots.pop()  # another thread may have taken the last one since the check
        except IndexError:
            memory = ctypes.create_string_buffer(header.size + arrays.size)
    else:
        memory = ctypes.create_string_buffer(header.size + arrays.size)
    if type(memory) is int:
        buffer, at = _slab, memory * _SLOT_BYTES
        base = _SLAB_ADDRESS + at
    else:
        buffer, at = memory, 0
        base = ctypes.addressof(memory)
    shape_at, strides_at = base + header.size, base + header.size + 8 * ndim
    tensor = (address, device[0], device[1], ndim, code, bits, 1, shape_at, strides_at, 0)
    if versioned:
        header.pack_into(buffer, at, *DLPACK_VERSION, 0, _DELETE_ADDRESS, READ_ONLY_FLAG if read_only else 0, *tensor)
        name = b"dltensor_versioned"
    else:
        header.pack_into(buffer, at, *tensor, 0, _DELETE_ADDRESS)
        name = b"dltensor"
    arrays.pack_into(buffer, at + header.size, *shape, *(s // dtype.itemsize for s in byte_strides))
    _alive[base] = (memory, owner)
    return _capsule_new(base, name, _DESTROY_ADDRESS)


def host_capsule(array: np.ndarray, dtype: DLPackDType, *, stream: int | None = None,
                 max_version: tuple[int, int] | None = None, dl_device: tuple[int, int] | None = None,
                 copy: bool | None = None) -> Any:
    """``__dlpack__`` of host ``array`` with its elements typed ``dtype``: numpy exports its own dtype only, so a
    block's bfloat16 (stored as uint16) goes out through here.  Read-only when ``array`` is."""
    if dl_device is not None and tuple(dl_device) != (KDL_CPU, 0):
        raise BufferError(f"this array is host memory; it cannot be exported to {tuple(dl_device)} without a copy")
    if copy:
        raise BufferError("block arrays export zero-copy views only (copy=True asked for a copy)")
    if stream is not None:
        raise BufferError("a host array takes no stream (DLPack: stream must be None for kDLCPU)")
    versioned = max_version is not None and max_version[0] >= 1
    return make_capsule(array, array.ctypes.data, (KDL_CPU, 0), array.shape, array.strides, dtype, versioned,
                        not array.flags.writeable)


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype, _capsule_is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


@dataclass(frozen=True)
class DLPackExport:
    """What a producer's ``__dlpack__`` capsule says: where its elements are and how they are typed.

    ``capsule`` is kept unconsumed, so the producer's memory stays alive while this lives (its destructor
    calls the producer's deleter).
    """

    address: int  #: of element 0 (data plus byte_offset)
    device: tuple[int, int]
    shape: tuple[int, ...]
    byte_strides: tuple[int, ...]
    dtype: DLPackDType
    readonly: bool
    capsule: Any


def read_export(array: Any) -> DLPackExport:
    """Ask ``array`` for a DLPack capsule (no stream ordering: the caller orders its own work) and read it.

    The way to learn the layout of a tensor whose type numpy has no dtype for (a torch bfloat16 tensor);
    BufferError for what it cannot describe (another major version, vector lanes, an unknown type).
    """
    device = tuple(int(n) for n in array.__dlpack_device__())
    stream = None if device[0] == KDL_CPU else -1
    try:
        capsule = array.__dlpack__(stream=stream, max_version=DLPACK_VERSION)
    except TypeError:  # a producer older than DLPack 1.0 knows no max_version
        capsule = array.__dlpack__(stream=stream)
    readonly = False
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed = DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
        if managed.version.major != DLPACK_VERSION[0]:
            raise BufferError(f"DLPack {managed.version.major}.{managed.version.minor} capsules cannot be read here")
        tensor, readonly = managed.dl_tensor, bool(managed.flags & READ_ONLY_FLAG)
    elif _capsule_is_valid(capsule, b"dltensor"):
        tensor = DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dl_tensor
    else:
        raise BufferError(f"{type(array).__name__}.__dlpack__ returned no DLPack capsule")
    try:
        dtype = DLPackDType(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    except ValueError as exc:
        raise BufferError(str(exc)) from None
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) * dtype.itemsize for i in range(tensor.ndim))
    else:
        strides = contiguous_strides(shape, dtype.itemsize)
    return DLPackExport(int(tensor.data or 0) + int(tensor.byte_offset), (device[0], device[1]), shape, strides, dtype,
                        readonly, capsule)


def live_capsules() -> int:
    """How many capsules (consumed or not) still hold their owner: for tests and leak hunting."""
    return len(_alive)
