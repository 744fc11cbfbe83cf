"""The names of upstream's ``torch_conversions`` (``tensor_msgs/ExperimentalTensor``, Lyrical and newer) over
``GpuTensor``, for Humble to Rolling and zero-copy across processes.

Code written for ``torch_conversions`` ports by changing its import and saying where blocks come from:

- ``allocate_tensor_msg(shape, dtype, device=None, *, publisher)`` borrows a block of ``publisher`` (a
  :class:`TensorPublisher` of that dtype and a capacity the shape fits) and returns its writable
  :class:`TensorFrame`, not a message: a ``GpuTensor`` names a block that is only published once written.
  ``from_output_tensor_msg(frame)`` is the torch tensor to fill; ``frame.publish()`` sends it (upstream:
  ``publisher.publish(msg)``).  ``device`` must agree with the publisher's memory.
- ``to_tensor_msg(tensor, *, publisher)`` copies ``tensor`` into a block and publishes it; the message sent.
- ``from_input_tensor_msg(msg, clone=True, stream=None, *, reader=None)`` reads a received ``GpuTensor``:
  ``clone=False`` is the zero-copy, read-only tensor that holds the lease while it lives; ``clone=True`` an
  independent copy, the lease given back once the copy is done.  ``reader`` defaults to one per process.
- ``stream`` defaults to torch's current CUDA stream, as upstream's does: the read is ordered on it, so run
  the work on the tensor there.  A ``GpuTensor`` with no elements reads as an empty tensor (upstream: None).
- Every dtype DLPack and torch share travels, not only upstream's ten: uint16-64, complex and float8 too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.dlpack import from_dlpack

from ros2_cuda_ipc_core import DLPackDType
from ros2_cuda_ipc_msgs.msg import GpuTensor

from .frame import TensorFrame
from .publisher import TensorPublisher
from .reader import TensorReader

_default_reader: list[TensorReader] = []


def allocate_tensor_msg(shape: Sequence[int], dtype: torch.dtype, device: Any = None, *,
                        publisher: TensorPublisher, timeout: float = 0.0) -> TensorFrame:
    """A writable frame of ``publisher`` carrying ``shape`` when published; RuntimeError if no block is free
    within ``timeout`` seconds, ValueError if ``dtype``, ``shape`` or ``device`` do not fit the publisher."""
    if DLPackDType.of(dtype) != publisher.layout.dlpack_dtype:
        raise ValueError(f"{dtype} does not match this publisher's {publisher.layout.dlpack_dtype}")
    if device is not None and (torch.device(device).type == "cuda") != (publisher.pool.memory == "cuda"):
        raise ValueError(f"device {device} does not match the publisher's {publisher.pool.memory} memory")
    frame = publisher.borrow(timeout, shape=shape)
    if frame is None:
        raise RuntimeError(f"every block of {publisher.topic!r} is still in use")
    return frame


def from_output_tensor_msg(frame: TensorFrame, stream: Any = None) -> torch.Tensor:
    """The writable torch tensor of ``frame``, zero-copy; ``frame.publish(stream)`` once it is written."""
    return from_dlpack(frame)


def from_input_tensor_msg(msg: GpuTensor, clone: bool = True, stream: Any = None, *,
                          reader: TensorReader | None = None) -> torch.Tensor:
    """The received tensor: zero-copy and read-only (``clone=False``), or an independent copy (``clone=True``)."""
    reader = reader or _reader()
    consumer = _stream(stream, msg)
    # torch's current stream is the read's while torch takes the view and copies it: the lease goes back once the
    # work queued on the read's stream is done, so the clone must be queued there.
    on_consumer = contextlib.nullcontext() if consumer is None else torch.cuda.stream(consumer)
    with on_consumer, reader.read(msg, None if consumer is None else consumer.cuda_stream) as view:
        tensor = from_dlpack(view)  # the tensor holds its own share of the lease
        return tensor.clone() if clone else tensor


def to_tensor_msg(tensor: torch.Tensor, *, publisher: TensorPublisher, stream: Any = None,
                  header: Any = None) -> GpuTensor:
    """Copy ``tensor`` into a block of ``publisher`` and publish it; the message sent (RuntimeError: no block free)."""
    if tensor.is_cuda and stream is None:
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
    msg = publisher.publish_array(tensor.detach(), stream, header)
    if msg is None:
        raise RuntimeError(f"every block of {publisher.topic!r} is still in use")
    return msg


def _stream(stream: Any, msg: GpuTensor) -> torch.cuda.Stream | None:
    """The torch stream a CUDA read is ordered on: ``stream`` (a torch stream or a raw handle), else the current one."""
    if msg.core.memory != msg.core.MEMORY_CUDA or not torch.cuda.is_available():
        return None
    if stream is None:
        device = int(msg.core.device_id)  # a sender's field: a device torch lacks is the reader's to refuse
        return torch.cuda.current_stream(device) if device < torch.cuda.device_count() else None
    return stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(int(stream))


def _reader() -> TensorReader:
    if not _default_reader:
        _default_reader.append(TensorReader())
    return _default_reader[0]


__all__ = ["allocate_tensor_msg", "from_input_tensor_msg", "from_output_tensor_msg", "to_tensor_msg"]
