"""The wire messages: importable, serializable field for field, constants as DESIGN.md fixes them."""

import numpy as np
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import PointField

from ros2_cuda_ipc_msgs.msg import BufferCore, GpuImage, GpuPointCloud2


def full_core(seed: int = 3) -> BufferCore:
    core = BufferCore()
    core.socket_path = f"@ros2_cuda_ipc/{seed}/pool"
    core.pool_id = np.arange(seed, seed + 16, dtype=np.uint8)
    core.block_id = 7 + seed
    core.uid = 2**63 + seed
    core.publisher_pid = 4242
    core.memory = BufferCore.MEMORY_CUDA
    core.device_id = 3
    core.event_handle = np.arange(64, dtype=np.uint8) ^ seed
    core.byte_size = 33_177_600
    return core


def assert_core_equal(a: BufferCore, b: BufferCore) -> None:
    for name in ("socket_path", "block_id", "uid", "publisher_pid", "memory", "device_id", "byte_size"):
        assert getattr(a, name) == getattr(b, name), name
    assert bytes(a.pool_id) == bytes(b.pool_id)
    assert bytes(a.event_handle) == bytes(b.event_handle)


def roundtrip(msg):
    return deserialize_message(serialize_message(msg), type(msg))


def test_constants_match_design():
    assert (BufferCore.MEMORY_HOST, BufferCore.MEMORY_CUDA) == (0, 1)
    dtypes = ["U8", "U16", "F16", "F32", "F64", "S8", "S16", "S32"]
    assert [getattr(GpuImage, f"DTYPE_{name}") for name in dtypes] == list(range(8))


def test_buffer_core_roundtrip():
    core = full_core()
    assert_core_equal(roundtrip(core), core)
    assert len(serialize_message(core)) < 300  # "a few hundred bytes"


def test_gpu_image_roundtrip():
    msg = GpuImage()
    msg.header.frame_id = "camera"
    msg.header.stamp.sec, msg.header.stamp.nanosec = 17, 99
    msg.dtype = GpuImage.DTYPE_F16
    msg.shape = np.array([720, 1280, 4], dtype=np.uint32)
    msg.strides = np.array([10240 + 64, 8, 2], dtype=np.uint64)
    msg.encoding = "rgba16"
    msg.core = full_core(5)
    back = roundtrip(msg)
    assert (back.header.frame_id, back.header.stamp.sec, back.header.stamp.nanosec) == ("camera", 17, 99)
    assert back.dtype == GpuImage.DTYPE_F16 and back.encoding == "rgba16"
    assert list(back.shape) == [720, 1280, 4] and list(back.strides) == [10304, 8, 2]
    assert_core_equal(back.core, msg.core)


def test_gpu_point_cloud_roundtrip():
    msg = GpuPointCloud2()
    msg.header.frame_id = "lidar"
    msg.height, msg.width = 2, 65536
    msg.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")]
    msg.is_bigendian, msg.is_dense = True, True
    msg.point_step, msg.row_step = 16, 16 * 65536
    msg.core = full_core(9)
    back = roundtrip(msg)
    assert (back.height, back.width, back.point_step, back.row_step) == (2, 65536, 16, 16 * 65536)
    assert back.is_bigendian and back.is_dense and back.header.frame_id == "lidar"
    assert [(f.name, f.offset, f.datatype, f.count) for f in back.fields] == [
        ("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)]
    assert_core_equal(back.core, msg.core)


def test_gpu_tensor_roundtrip():
    from ros2_cuda_ipc_msgs.msg import GpuTensor

    msg = GpuTensor()
    msg.header.frame_id = "camera"
    msg.dtype_code, msg.dtype_bits, msg.dtype_lanes = 4, 16, 1  # DLPack's bfloat16
    msg.shape = [8, 3, 2160, 3840]
    msg.strides = [3 * 2160 * 3840, 1, 3 * 3840, 3]  # channels last: strides in elements
    msg.byte_offset = 2**40
    msg.dim_names = ["N", "C", "H", "W"]
    msg.core = full_core()
    back = roundtrip(msg)
    assert (back.dtype_code, back.dtype_bits, back.dtype_lanes, back.byte_offset) == (4, 16, 1, 2**40)
    assert list(back.shape) == list(msg.shape) and list(back.strides) == list(msg.strides)
    assert list(back.dim_names) == ["N", "C", "H", "W"] and back.header.frame_id == "camera"
    assert_core_equal(back.core, msg.core)
