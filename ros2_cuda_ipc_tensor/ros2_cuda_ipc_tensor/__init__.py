"""Zero-copy N-d tensors over ros2_cuda_ipc: ``TensorPublisher``, ``TensorReader`` / ``TensorSubscription`` and
the MultiArray bridge.

``GpuTensor`` carries DLPack's dtype triple, shape and strides in elements (``tensor_msgs/ExperimentalTensor``'s
fields) and optional dimension names.  ``ros2_cuda_ipc_tensor.torch`` has upstream's torch_conversions names.
"""

from .frame import TensorFrame
from .layout import MAX_RANK, TensorLayout
from .multiarray import multiarray_type, publish_multiarray_msg, to_multiarray_msg
from .publisher import TensorPublisher
from .reader import TensorReader
from .subscription import TensorSubscription
from .tensor_array import TensorArray
from .view import TensorView

__all__ = [
    "MAX_RANK",
    "TensorArray",
    "TensorFrame",
    "TensorLayout",
    "TensorPublisher",
    "TensorReader",
    "TensorSubscription",
    "TensorView",
    "multiarray_type",
    "publish_multiarray_msg",
    "to_multiarray_msg",
]
