"""The bridge to ``std_msgs/*MultiArray``, the array message every distro has: one download out, one upload in.

For tools and bags.  The MultiArray's ``layout.dim`` carries the shape (``label`` the dimension name,
``stride`` the product of the sizes from that dimension in, as std_msgs documents); the data is dense,
row-major.  std_msgs has no float16, bfloat16, float8 or complex arrays: those are refused by name;
bool travels as ``UInt8MultiArray`` (0 and 1).
"""

from __future__ import annotations

import array
import math
from typing import TYPE_CHECKING, Any

import numpy as np
from std_msgs.msg import (
    Float32MultiArray,
    Float64MultiArray,
    Int8MultiArray,
    Int16MultiArray,
    Int32MultiArray,
    Int64MultiArray,
    MultiArrayDimension,
    UInt8MultiArray,
    UInt16MultiArray,
    UInt32MultiArray,
    UInt64MultiArray,
)

from ros2_cuda_ipc_core import InvalidDescriptorError, StridedLayout, beyond_array_limits
from ros2_cuda_ipc_msgs.msg import GpuTensor

from .layout import MAX_RANK

if TYPE_CHECKING:
    from .publisher import TensorPublisher
    from .view import TensorView

#: numpy dtype -> (MultiArray type, array.array typecode of its data)
_MESSAGES: dict[np.dtype, tuple[type, str]] = {
    np.dtype(np.int8): (Int8MultiArray, "b"), np.dtype(np.int16): (Int16MultiArray, "h"),
    np.dtype(np.int32): (Int32MultiArray, "i"), np.dtype(np.int64): (Int64MultiArray, "q"),
    np.dtype(np.uint8): (UInt8MultiArray, "B"), np.dtype(np.uint16): (UInt16MultiArray, "H"),
    np.dtype(np.uint32): (UInt32MultiArray, "I"), np.dtype(np.uint64): (UInt64MultiArray, "Q"),
    np.dtype(np.float32): (Float32MultiArray, "f"), np.dtype(np.float64): (Float64MultiArray, "d"),
}
_DTYPES = {message: dtype for dtype, (message, _) in _MESSAGES.items()}


def multiarray_type(view: TensorView) -> type:
    """The ``std_msgs`` MultiArray type for ``view``'s elements; ValueError naming a type std_msgs lacks."""
    dtype = np.dtype(np.uint8) if view.dtype == np.bool_ else view.dtype
    if view.layout.element is not None or dtype not in _MESSAGES:
        raise ValueError(f"std_msgs has no MultiArray of {view.dlpack_dtype}: convert the tensor first "
                         "(to float32, say), or record the GpuTensor's bytes another way")
    return _MESSAGES[dtype][0]


def to_multiarray_msg(view: TensorView) -> Any:
    """A ``std_msgs/*MultiArray`` of ``view``: one strided download into the message's dense data."""
    message_type = multiarray_type(view)
    dtype = _DTYPES[message_type]
    typecode = _MESSAGES[dtype][1]
    data = array.array(typecode, bytes(math.prod(view.shape) * dtype.itemsize))
    if data:
        dense = np.frombuffer(data, dtype=dtype).reshape(view.shape)
        view.copy_out(view.layout, dense.view(view.dtype))
    msg = message_type()
    msg.layout.dim = [MultiArrayDimension(label=name, size=size, stride=stride)
                      for name, size, stride in zip(_labels(view), view.shape, _dense_strides(view.shape), strict=True)]
    msg.layout.data_offset = 0
    msg.data = data
    return msg


def publish_multiarray_msg(publisher: TensorPublisher, msg: Any, header: Any = None) -> GpuTensor | None:
    """Publish a ``std_msgs/*MultiArray`` through ``publisher`` (its type, a shape that fits) with one upload.

    ``layout.dim`` must describe dense row-major data from ``data_offset`` (the usual; anything else is an
    InvalidDescriptorError saying which dimension).  None if no block was free.
    """
    dtype = _DTYPES.get(type(msg))
    if dtype is None:
        raise TypeError(f"{type(msg).__name__} is not one of std_msgs' numeric MultiArray types")
    dims = list(msg.layout.dim)
    if len(dims) > MAX_RANK:
        raise InvalidDescriptorError(f"MultiArray layout.dim has {len(dims)} dimensions; at most {MAX_RANK}")
    shape = tuple(int(d.size) for d in dims)
    problem = beyond_array_limits(shape, StridedLayout.contiguous(shape, dtype).strides, dtype.itemsize)
    if problem is not None:  # sizes of an empty array too: numpy's refusal would name nothing
        raise InvalidDescriptorError(f"MultiArray layout.dim sizes: {problem}")
    count: int = math.prod(shape)
    for index, (dim, stride) in enumerate(zip(dims, _dense_strides(shape), strict=True)):
        if int(dim.stride) != stride and count:
            raise InvalidDescriptorError(f"MultiArray layout.dim[{index}].stride is {dim.stride}, not {stride}: only "
                                         "dense row-major data is read")
    offset = int(msg.layout.data_offset)
    if offset + count > len(msg.data):
        raise InvalidDescriptorError(f"MultiArray of shape {shape} from data_offset {offset} needs {offset + count} "
                                     f"values; data holds {len(msg.data)}")
    values = np.asarray(msg.data, dtype=dtype)[offset:offset + count].reshape(shape)
    if publisher.layout.dtype == np.bool_ and dtype == np.uint8:
        values = values != 0  # not a view of the bytes: a bool is 0 or 1, a sender's byte may be any value
    return publisher.publish_array(values, header=header)


def _labels(view: TensorView) -> tuple[str, ...]:
    return view.dim_names or ("",) * view.ndim


def _dense_strides(shape: tuple[int, ...]) -> list[int]:
    """std_msgs' strides: element counts of everything from each dimension in (``stride[0]`` is the total)."""
    strides, step = [], 1
    for size in reversed(shape):
        step *= size
        strides.append(step)
    return list(reversed(strides))
