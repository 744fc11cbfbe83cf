"""Zero-copy sharing of GPU and host buffers between ROS 2 processes.

A publisher borrows a block from a :class:`BlockManager`, writes it, and publishes the small
``BufferCore`` descriptor that :meth:`PublishBlock.prepare_publish` returns.  A :class:`Reader`
turns the descriptor back into a leased, read-only view of the very same memory.
"""

from .errors import (
    CudaDriverError,
    CudaUnavailableError,
    DeviceMismatchError,
    InvalidDescriptorError,
    PoolUnavailableError,
    Ros2CudaIpcError,
    StaleDescriptorError,
)
from .pool import BlockManager
from .publish_block import PublishBlock
from .read_handle import ReadHandle
from .reader import Reader
from .shutdown import run_nodes, run_tool

__all__ = [
    "BlockManager",
    "CudaDriverError",
    "CudaUnavailableError",
    "DeviceMismatchError",
    "InvalidDescriptorError",
    "PoolUnavailableError",
    "PublishBlock",
    "ReadHandle",
    "Reader",
    "Ros2CudaIpcError",
    "StaleDescriptorError",
    "run_nodes",
    "run_tool",
]
