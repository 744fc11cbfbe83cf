"""``TensorPublisher``: a pool of tensor-sized blocks and a ``GpuTensor`` publisher on one topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ros2_cuda_ipc_core import (
    DEFAULT_REUSE_DELAY,
    InvalidDescriptorError,
    MemoryKind,
    StreamLike,
    TypedPublisher,
    check_integers,
    strided_source,
)
from ros2_cuda_ipc_msgs.msg import GpuTensor

from .frame import TensorFrame
from .layout import TensorLayout


class TensorPublisher(TypedPublisher[TensorLayout, GpuTensor]):
    """Publishes N-d tensors without copying them: borrow a frame, fill it, publish it.

    ``shape`` is the capacity: a message may carry a smaller leading dimension (``frame.publish(shape=...)``,
    a batch that varies).  ``dtype``: numpy, torch, a name (``"bfloat16"``) or a DLPack ``(code, bits, lanes)``.
    ``strides`` in elements (None: contiguous; a transposed or channels-last layout travels as it is).
    ``dim_names``: none, or one per dimension.  ``block_count``, ``memory``, ``device`` and ``reuse_delay``
    configure the pool as in ``TypedPublisher``.  Bad arguments are a ValueError naming them (a TypeError where one is
    not an int).
    """

    def __init__(self, node: Any, topic: str, *, shape: Sequence[int], dtype: Any, strides: Sequence[int] | None = None,
                 dim_names: Sequence[str] = (), block_count: int = 4, memory: MemoryKind = "auto", device: int = 0,
                 qos: Any = 10, reuse_delay: float = DEFAULT_REUSE_DELAY) -> None:
        shape = check_integers("shape", shape)
        strides = None if strides is None else check_integers("strides", strides)
        try:
            layout = TensorLayout.create(shape, dtype, strides, dim_names)
            if 0 in layout.shape:
                raise InvalidDescriptorError(f"shape {layout.shape} holds no element: give the capacity")
            layout.validate(layout.byte_extent)
        except InvalidDescriptorError as exc:
            raise ValueError(str(exc).removeprefix("GpuTensor ")) from None
        super().__init__(node, topic, GpuTensor, layout, block_count=block_count, memory=memory, device=device,
                         qos=qos, reuse_delay=reuse_delay)

    def borrow(self, timeout: float = 0.0, *, shape: Sequence[int] | None = None) -> TensorFrame | None:
        """A writable tensor of the full capacity (or of ``shape``, a smaller leading dimension), or None if every
        block is still in use after ``timeout`` seconds."""
        layout = self.layout if shape is None else self.layout.with_batch(shape)  # refused before a block is taken
        block = self.pool.acquire_for_publish(timeout)
        return None if block is None else TensorFrame(self, block, layout)

    def publish_array(self, tensor: Any, stream: StreamLike = None, header: Any = None) -> GpuTensor | None:
        """Copy any DLPack / CUDA-array-interface / numpy tensor (host or device, any strides; bfloat16 and float8
        through DLPack) of this publisher's type and a shape that fits the capacity into a block, and publish it.

        One strided copy into the capacity's layout.  Returns the message, or None if no block is free.
        """
        source = strided_source(tensor)
        if (source.layout.dtype, source.layout.element) != (self.layout.dtype, self.layout.element):
            raise ValueError(f"the tensor is {source.layout.element or source.layout.dtype}, this publisher sends "
                             f"{self.layout.dlpack_dtype}")
        frame = self.borrow(shape=source.layout.shape)
        if frame is None:
            return None
        with frame:
            if 0 not in frame.shape:
                frame.copy_in(frame.layout, source, stream)
            return frame.publish(stream, header)
