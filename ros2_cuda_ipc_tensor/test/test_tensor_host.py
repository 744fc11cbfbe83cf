"""Tensors on host memory in one process over real rclpy: the publisher's arguments, batches, the numpy refusal for
bfloat16 / float8, every kind of invalid metadata refused before any lease, and the MultiArray bridge."""

import copy

import numpy as np
import pytest
from tensor_cases import bits, same_bits

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_tensor import TensorPublisher, TensorReader, publish_multiarray_msg, to_multiarray_msg

SHAPE = (4, 3, 8, 8)


@pytest.fixture
def publisher(node):
    with TensorPublisher(node, "tensor_host", shape=SHAPE, dtype=np.float32, dim_names=("N", "C", "H", "W"),
                         memory="host", reuse_delay=0) as pub:
        yield pub


@pytest.fixture
def reader():
    return TensorReader()


def published(pub, batch=2):
    values = np.arange(batch * 3 * 8 * 8, dtype=np.float32).reshape(batch, 3, 8, 8)
    return pub.publish_array(values), values


def test_a_batch_smaller_than_the_capacity(publisher, reader):
    for batch in (1, 4, 2, 3):
        msg, values = published(publisher, batch)
        assert list(msg.shape) == [batch, 3, 8, 8] and list(msg.strides) == [192, 64, 8, 1]
        assert msg.core.byte_size == values.nbytes  # the batch's bytes only
        with reader.read(msg) as view:
            assert view.dim_names == ("N", "C", "H", "W") and view.dlpack_dtype.triple == (2, 32, 1)
            np.testing.assert_array_equal(np.asarray(view), values)
    assert reader.stats()["leases_held"] == 0


def test_a_frame_publishes_a_smaller_batch_in_place(publisher, reader):
    with publisher.borrow() as frame:
        np.asarray(frame)[...] = 7.0
        msg = frame.publish(shape=(1, 3, 8, 8))
    with reader.read(msg) as view:
        assert view.shape == (1, 3, 8, 8) and (np.asarray(view) == 7.0).all()
    with publisher.borrow() as frame, pytest.raises(ValueError, match="only the leading dimension"):
        frame.publish(shape=(2, 3, 8, 4))


@pytest.mark.parametrize("kwargs,needle", [
    ({"shape": (2, 3), "dtype": "float12"}, "float12"),
    ({"shape": (2, 3), "dtype": (2, 32, 1, 9)}, r"\(2, 32, 1, 9\) is not a DLPack \(code, bits, lanes\)"),
    ({"shape": (2, 3), "dtype": (2,)}, r"\(2,\) is not a DLPack \(code, bits, lanes\)"),
    ({"shape": (2, 3), "dtype": np.float32, "strides": (3,)}, "strides has 1 entries"),
    ({"shape": (2, 3), "dtype": np.float32, "strides": (1, 1)}, "overlap"),
    ({"shape": (2, -3), "dtype": np.float32}, r"shape\[1\] is -3"),
    ({"shape": (0, 3), "dtype": np.float32}, "holds no element"),
    ({"shape": (1,) * 17, "dtype": np.float32}, "at most 16"),
    ({"shape": (2**63, 1), "dtype": np.float32}, r"shape\[0\] is 9223372036854775808: beyond int64"),
    ({"shape": (2, 3), "dtype": np.float32, "strides": (2**62, 1)}, r"strides\[0\] is 18446744073709551616 bytes"),
    ({"shape": (2, 3), "dtype": np.float32, "dim_names": ("N",)}, "dim_names has 1 names"),
])
def test_publisher_arguments_are_checked(node, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        TensorPublisher(node, "tensor_bad", memory="host", **kwargs)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_numpy_says_why_it_refuses_bfloat16_and_float8(node, reader, name):
    expected = bits(name, 5, 2)
    with TensorPublisher(node, f"tensor_{name}", shape=(2, 3, 5), dtype=name, memory="host") as pub:
        with pub.borrow() as frame:
            frame.array[...] = expected
            msg = frame.publish()
        with reader.read(msg) as view:
            assert same_bits(view.array, expected) and view.dtype == expected.dtype  # the bits, through numpy
            with pytest.raises(TypeError, match=f"numpy has no {name} dtype.*DLPack"):
                np.asarray(view)
            assert not hasattr(view, "__cuda_array_interface__")


def test_an_empty_tensor_travels(node, reader):
    with TensorPublisher(node, "tensor_detections", shape=(100, 6), dtype=np.float32, memory="host") as pub:
        msg = pub.publish_array(np.zeros((0, 6), np.float32))
        with reader.read(msg) as view:
            assert view.shape == (0, 6) and np.asarray(view).size == 0


def _invalid(msg, changes):
    bad = copy.deepcopy(msg)
    for field, value in changes.items():
        if field == "byte_size":
            bad.core.byte_size = value
        else:
            setattr(bad, field, value)
    return bad


@pytest.mark.parametrize("changes,needle", [
    ({"dtype_code": 3}, "dtype_code 3"),
    ({"dtype_code": 200}, "dtype_code 200"),
    ({"dtype_bits": 12}, "dtype_bits 12"),
    ({"dtype_lanes": 4}, "dtype_lanes 4"),
    ({"shape": [1] * 17}, "at most 16"),
    ({"shape": [2, -3, 8, 8]}, r"shape\[1\] is -3"),
    ({"strides": [192, 64, 8]}, "strides has 3 entries"),
    ({"strides": [192, 64, -8, 1]}, r"strides\[2\] is -8"),
    ({"strides": [192, 64, 1, 1]}, "overlap"),
    ({"strides": [2**62, 64, 8, 1]}, r"strides\[0\] is 18446744073709551616 bytes: beyond int64"),
    ({"strides": [2**40, 64, 8, 1]}, "core.byte_size"),
    ({"shape": [2**40, 3, 8, 8]}, "core.byte_size"),
    ({"byte_offset": 6}, "byte_offset 6 is not a multiple"),
    ({"byte_offset": 2**63}, "GpuTensor shape .* at offset 9223372036854775808 reaches byte .*: beyond int64"),
    ({"byte_offset": 2**40}, "core.byte_size"),
    ({"byte_size": 100}, "core.byte_size 100"),
    ({"dim_names": ["N", "C"]}, "dim_names has 2 names"),
    ({"strides": [1] * 1_000_000}, "strides has 1000000 entries; at most 16"),  # refused before a million conversions
    ({"dim_names": ["N"] * 100_000}, "dim_names has 100000 entries; at most 16"),
    # An empty tensor touches no byte, but numpy still refuses one that no array can be (and named no field).
    ({"shape": [0, 2**63 - 1], "strides": [], "dim_names": []},
     r"GpuTensor shape \(0, 9223372036854775807\) is .* beyond int64 bytes"),
    ({"shape": [0, 2**31, 2**31, 2]}, r"GpuTensor shape \(0, .* beyond int64 bytes"),
    ({"shape": [0, 3, 8, 8], "strides": [2**62, 64, 8, 1]}, r"GpuTensor strides\[0\] is 18446744073709551616 bytes"),
    ({"shape": [0, 2**40, 8, 8], "strides": [192, 2**30, 8, 1]}, r"GpuTensor shape .* with strides .* beyond int64"),
])
def test_invalid_metadata_is_refused_before_any_lease(publisher, reader, changes, needle):
    msg, _ = published(publisher)
    with pytest.raises(InvalidDescriptorError, match=needle):
        reader.read(_invalid(msg, changes))
    assert reader.stats()["leases_held"] == 0 and reader.stats()["reads"] == 0
    assert reader.stats()["invalid_descriptors"] == 1
    with reader.read(msg) as view:  # the reader is none the worse
        assert view.shape == (2, 3, 8, 8)


# --- std_msgs/*MultiArray ----------------------------------------------------------------------------------------

def test_multiarray_out_is_dense_with_the_dim_names(node, reader):
    values = np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4)
    with TensorPublisher(node, "tensor_t", shape=(2, 4, 3), dtype=np.int16, strides=(12, 1, 4),
                         dim_names=("N", "W", "C"), memory="host") as pub:
        msg = pub.publish_array(values.transpose(0, 2, 1))  # one strided copy into the transposed layout
        with reader.read(msg) as view:
            assert view.element_strides == (12, 1, 4)
            out = to_multiarray_msg(view)
    assert type(out).__name__ == "Int16MultiArray"
    assert [(d.label, d.size, d.stride) for d in out.layout.dim] == [("N", 2, 24), ("W", 4, 12), ("C", 3, 3)]
    np.testing.assert_array_equal(np.asarray(out.data).reshape(2, 4, 3), values.transpose(0, 2, 1))


def test_multiarray_round_trip(publisher, reader):
    msg, values = published(publisher, 3)
    with reader.read(msg) as view:
        out = to_multiarray_msg(view)
    again = publish_multiarray_msg(publisher, out)
    with reader.read(again) as view:
        np.testing.assert_array_equal(np.asarray(view), values)


def test_multiarray_refuses_what_std_msgs_cannot_hold(node, reader):
    with TensorPublisher(node, "tensor_h", shape=(2,), dtype=np.float16, memory="host") as pub:
        msg = pub.publish_array(np.ones(2, np.float16))
        with reader.read(msg) as view, pytest.raises(ValueError, match="no MultiArray of float16"):
            to_multiarray_msg(view)


def test_multiarray_in_is_checked(publisher):
    from std_msgs.msg import Float32MultiArray, MultiArrayDimension

    msg = Float32MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=label, size=size, stride=stride)  # std_msgs' strides: sizes from here in
                      for label, size, stride in [("N", 1, 192), ("C", 3, 192), ("H", 8, 64), ("W", 8, 8)]]
    msg.data = [0.0] * 191
    with pytest.raises(InvalidDescriptorError, match="needs 192 values"):
        publish_multiarray_msg(publisher, msg)
    msg.layout.dim[1].stride = 65
    with pytest.raises(InvalidDescriptorError, match=r"dim\[1\].stride is 65"):
        publish_multiarray_msg(publisher, msg)
    msg.layout.dim = [MultiArrayDimension(label="", size=size, stride=0) for size in (0, 2**32 - 1, 2**32 - 1, 2**32 - 1)]
    with pytest.raises(InvalidDescriptorError, match=r"MultiArray layout.dim sizes: shape \(0, 4294967295, .* beyond int64"):
        publish_multiarray_msg(publisher, msg)  # empty, but no array can be of that shape


def test_multiarray_uint8_into_a_bool_tensor_is_0_or_1(node, reader):
    """A UInt8MultiArray's bytes may be anything: a bool tensor's must be 0 or 1 (torch reads other bytes oddly)."""
    from std_msgs.msg import MultiArrayDimension, UInt8MultiArray

    msg = UInt8MultiArray()
    msg.layout.dim = [MultiArrayDimension(label="mask", size=4, stride=4)]
    msg.data = [0, 1, 2, 255]
    with TensorPublisher(node, "tensor_mask", shape=(4,), dtype=np.bool_, memory="host") as pub:
        sent = publish_multiarray_msg(pub, msg)
        with reader.read(sent) as view:
            assert view.array.view(np.uint8).tolist() == [0, 1, 1, 1]
