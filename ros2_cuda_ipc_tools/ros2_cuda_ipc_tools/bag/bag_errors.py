"""``BagError``: a bag, topic or type the bag tools cannot use; the tools print its one line and exit 2."""

from __future__ import annotations

from ros2_cuda_ipc_core import Ros2CudaIpcError

__all__ = ["BagError"]


class BagError(Ros2CudaIpcError):
    """A bag that cannot be read or written, a topic not in it, a type not installed: one line that says which."""
