"""The ctypes DLPack exporter, checked against numpy's importer on host memory (no GPU needed)."""

import ctypes
import gc
import subprocess
import sys

import numpy as np
import pytest

from ros2_cuda_ipc_core.memory.dlpack import KDL_CPU, live_capsules, make_capsule


class HostExport:
    """Exposes a numpy array through our capsule maker, as CudaArray does for device memory."""

    def __init__(self, array: np.ndarray, read_only: bool) -> None:
        self.array, self.read_only = array, read_only

    def __dlpack_device__(self):
        return (KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        versioned = max_version is not None and max_version[0] >= 1
        return make_capsule(self, self.array.ctypes.data, (KDL_CPU, 0), self.array.shape, self.array.strides,
                            self.array.dtype, versioned, self.read_only)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.float16, np.float32, np.float64, np.complex64])
def test_roundtrip_shares_memory(dtype):
    source = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    out = np.from_dlpack(HostExport(source, read_only=False))
    assert out.dtype == source.dtype and out.shape == source.shape and out.strides == source.strides
    assert out.ctypes.data == source.ctypes.data
    np.testing.assert_array_equal(out, source)


def test_strided_planar_layout():
    base = np.arange(2 * 3 * 4, dtype=np.float32).reshape(4, 2, 3)  # planar: channel-first in memory
    hwc = base.transpose(1, 2, 0)
    out = np.from_dlpack(HostExport(hwc, read_only=False))
    assert out.strides == hwc.strides
    np.testing.assert_array_equal(out, hwc)


def test_read_only_flag_reaches_the_consumer():
    source = np.zeros(8, np.uint8)
    out = np.from_dlpack(HostExport(source, read_only=True))
    assert not out.flags.writeable
    writable = np.from_dlpack(HostExport(source, read_only=False))
    writable[0] = 5
    assert source[0] == 5


def test_capsule_keeps_owner_until_consumer_is_done():
    gc.collect()
    before = live_capsules()
    out = np.from_dlpack(HostExport(np.ones(4, np.uint8), read_only=True))
    assert live_capsules() == before + 1
    del out
    gc.collect()
    assert live_capsules() == before
    unused = HostExport(np.ones(4, np.uint8), read_only=True).__dlpack__(max_version=(1, 0))
    assert live_capsules() == before + 1
    del unused  # an unconsumed capsule frees its tensor itself
    gc.collect()
    assert live_capsules() == before


def test_strides_must_be_whole_elements():
    with pytest.raises(BufferError):
        make_capsule(None, 0, (KDL_CPU, 0), (2, 2), (6, 3), np.dtype(np.uint16), True, True)
    with pytest.raises(BufferError):
        make_capsule(None, 0, (KDL_CPU, 0), (2,), (8,), np.dtype("M8[s]"), True, True)


@pytest.mark.skipif(np.dtype(np.clongdouble).itemsize < 32, reason="long double is double here: no 256-bit complex")
def test_a_dtype_wider_than_dlpack_bits_is_refused_before_a_slot_is_taken():
    """DLPack counts bits in a uint8: complex256 is a BufferError, and the slab slot is not lost on the way."""
    from ros2_cuda_ipc_core.memory import dlpack

    free = len(dlpack._free_slots)
    with pytest.raises(BufferError, match="no DLPack equivalent"):
        make_capsule(None, 0, (KDL_CPU, 0), (2,), (32,), np.dtype(np.clongdouble), True, True)
    assert len(dlpack._free_slots) == free


@pytest.mark.parametrize("versioned", [True, False])
def test_capsule_bytes_read_back_through_the_dlpack_structures(versioned):
    from ros2_cuda_ipc_core.memory.dlpack import KDL_CUDA, DLManagedTensor, DLManagedTensorVersioned

    capsule = make_capsule(None, 0xDEAD0000, (KDL_CUDA, 3), (5, 7, 4), (112, 16, 4), np.dtype(np.float32),
                           versioned, True)
    name = b"dltensor_versioned" if versioned else b"dltensor"
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, name)
    managed = (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(address)
    tensor = managed.dl_tensor
    assert (tensor.data, tensor.device.device_type, tensor.device.device_id, tensor.ndim) == (0xDEAD0000, KDL_CUDA, 3, 3)
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes, tensor.byte_offset) == (2, 32, 1, 0)
    assert [tensor.shape[i] for i in range(3)] == [5, 7, 4] and [tensor.strides[i] for i in range(3)] == [28, 4, 1]
    assert managed.manager_ctx is None and managed.deleter
    if versioned:
        assert (managed.version.major, managed.version.minor, managed.flags) == (1, 1, 1)


def test_more_live_capsules_than_the_slab_holds():
    """Capsules share a slab of slots; past it each gets its own buffer, and every one stays right."""
    gc.collect()
    before = live_capsules()
    sources = [np.full(3, i, dtype=np.uint16) for i in range(700)]
    outs = [np.from_dlpack(HostExport(source, read_only=True)) for source in sources]
    assert live_capsules() == before + 700
    for i, (source, out) in enumerate(zip(sources, outs, strict=True)):
        assert out.ctypes.data == source.ctypes.data and out.tolist() == [i, i, i]
    del outs, out
    gc.collect()
    assert live_capsules() == before
    again = [np.from_dlpack(HostExport(source, read_only=True)) for source in sources[:10]]  # slots reused
    assert [int(out[0]) for out in again] == list(range(10))


def test_many_dimensions_get_their_own_buffer():
    source = np.arange(2**14, dtype=np.uint8).reshape((2,) * 14)
    out = np.from_dlpack(HostExport(source, read_only=False))
    assert out.shape == source.shape and out.strides == source.strides
    np.testing.assert_array_equal(out, source)


def test_a_consumer_that_outlives_the_modules_exits_cleanly():
    """A tensor kept where it is freed last (on ``sys``, as an extension's cache might) calls our deleter while
    the interpreter tears its modules down: the callback and the slab must still be there (it crashed before)."""
    script = (
        "import sys\n"
        "import numpy as np\n"
        "from ros2_cuda_ipc_core.memory.dlpack import KDL_CPU, make_capsule\n"
        "class HostExport:\n"
        "    def __init__(self, array): self.array = array\n"
        "    def __dlpack_device__(self): return (KDL_CPU, 0)\n"
        "    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):\n"
        "        a = self.array\n"
        "        return make_capsule(self, a.ctypes.data, (KDL_CPU, 0), a.shape, a.strides, a.dtype,\n"
        "                            max_version is not None and max_version[0] >= 1, False)\n"
        "sys.kept_tensor = np.from_dlpack(HostExport(np.arange(6.0)))\n"
        "sys.kept_wide = np.from_dlpack(HostExport(np.zeros((1,) * 14)))\n"  # its own buffer, not a slot
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")


# --- DLPack's types, numpy's and the rest (bfloat16, float8) ----------------------------------------------------

NUMPY_TYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
               "float64", "complex64", "complex128"]
NUMPYLESS_TYPES = ["bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
                   "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"]


@pytest.mark.parametrize("name", NUMPY_TYPES + NUMPYLESS_TYPES)
def test_every_dtype_has_its_dlpack_code_and_storage(name):
    from ros2_cuda_ipc_core import DLPackDType

    element = DLPackDType.of(name)
    assert element.name == name and DLPackDType.from_fields(*element.triple) == element
    assert element.storage.itemsize == element.itemsize
    if name in NUMPY_TYPES:
        assert element.numpy == np.dtype(name) and DLPackDType.of(np.dtype(name)) == element
    else:
        assert element.numpy is None and element.storage.kind == "u" and name in element.numpy_refusal


def test_dlpack_codes_are_dlpack_1_1s():
    from ros2_cuda_ipc_core import DLPackDType

    assert DLPackDType.of("bfloat16").triple == (4, 16, 1)
    assert DLPackDType.of("float8_e4m3fn").triple == (10, 8, 1) and DLPackDType.of("float8_e5m2").triple == (12, 8, 1)
    assert DLPackDType.of(np.bool_).triple == (6, 8, 1) and DLPackDType.of(np.complex128).triple == (5, 128, 1)


@pytest.mark.parametrize("fields,needle", [((3, 8, 1), "dtype_code 3"), ((99, 8, 1), "dtype_code 99"),
                                           ((2, 8, 1), "dtype_bits 8"), ((4, 32, 1), "dtype_bits 32"),
                                           ((2, 32, 4), "dtype_lanes 4")])
def test_message_fields_are_checked_naming_the_field(fields, needle):
    from ros2_cuda_ipc_core import DLPackDType, InvalidDescriptorError

    with pytest.raises(InvalidDescriptorError, match=needle):
        DLPackDType.from_fields(*fields, what="GpuTensor")


@pytest.mark.parametrize("name", NUMPYLESS_TYPES)
def test_a_type_numpy_lacks_exports_under_its_own_code(name):
    from ros2_cuda_ipc_core import DLPackDType
    from ros2_cuda_ipc_core.memory.dlpack import host_capsule, read_export

    element = DLPackDType.of(name)
    bits = np.arange(12, dtype=element.storage).reshape(3, 4).T  # transposed: strides travel as they are

    class Bits:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            return host_capsule(bits, element, **kwargs)

    export = read_export(Bits())
    assert (export.address, export.shape, export.byte_strides) == (bits.ctypes.data, (4, 3), bits.strides)
    assert export.dtype == element and not export.readonly
    torch = pytest.importorskip("torch")
    if not hasattr(torch, name):
        pytest.skip(f"torch has no {name}")
    tensor = torch.from_dlpack(Bits())
    assert tensor.dtype == getattr(torch, name) and tensor.data_ptr() == bits.ctypes.data
    assert tensor.view(torch.uint8 if element.bits == 8 else torch.int16).numpy().view(element.storage).tolist() == \
        bits.tolist()
