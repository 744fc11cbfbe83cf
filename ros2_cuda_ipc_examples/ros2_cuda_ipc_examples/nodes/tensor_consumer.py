"""``TensorConsumer``: an example consumer of ``GpuTensor`` NCHW images (what ``Preprocess`` publishes).

The same reading, checking and timing as :class:`ImageConsumer`; :meth:`process` gets the (N, C, H, W)
zero-copy tensor of the backend (float32 values for a type the backend lacks: numpy's and cupy's bfloat16),
and the probe checks the first image of the batch, channels last.
"""

from __future__ import annotations

from typing import Any

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_msgs.msg import BufferCore, GpuTensor
from ros2_cuda_ipc_tensor import TensorReader

from .arrays import ArrayBackend
from .consumer import ImageConsumer
from .pipeline_node import ParameterError
from .preprocess import DTYPES

__all__ = ["TensorConsumer"]


class TensorConsumer(ImageConsumer):
    """Subclasses implement :meth:`process` (an (N, C, H, W) tensor) and call :meth:`listen` once ready."""

    resized = True

    def __init__(self, default_name: str, **kwargs: Any) -> None:
        super().__init__(default_name, **kwargs)
        if self.transport != "ipc":
            raise ParameterError(f"{type(self).__name__} reads GpuTensor messages only (transport {self.transport!r})")
        self.tensors = TensorReader(self.reader.reader)  # one pool import per process, shared with images
        self.input = "-"

    def listen(self) -> None:
        self.subscribe(GpuTensor, self.input_topic, self._on_tensor, 10)

    def picture(self, image: Any, arrays: ArrayBackend) -> Any:
        return arrays.channels_last(image[0])

    def _on_tensor(self, msg: GpuTensor) -> None:
        def work(view: Any, arrays: ArrayBackend) -> None:
            name = view.dlpack_dtype.name
            check_images(view.shape, name)  # any publisher may send any tensor on the topic
            tensor = arrays.tensor(view)
            if arrays.name != "torch" and view.layout.element is not None:
                tensor = arrays.from_element(tensor, name)  # the backend has no such type: float32 values
            self.input = f"GpuTensor {'x'.join(map(str, view.shape))} {name}"
            self._consume(tensor, msg.header, "", arrays)
            del tensor

        self.read_frame(self.tensors, msg, "cuda" if msg.core.memory == BufferCore.MEMORY_CUDA else "host", work)


def check_images(shape: tuple[int, ...], dtype_name: str) -> None:
    """InvalidDescriptorError (counted as a bad frame, not the node's end) unless ``shape`` is a batch of one or
    more 3-channel images of one of Preprocess's types."""
    if len(shape) != 4 or shape[0] < 1 or shape[1] != 3 or 0 in shape or dtype_name not in DTYPES:
        raise InvalidDescriptorError(f"a GpuTensor {'x'.join(map(str, shape))} {dtype_name} is not an (N>=1, 3, H, W) "
                                     f"batch of {', '.join(DTYPES)} images")
