"""``Preprocess``: camera frames to the usual DNN input, an NCHW normalized tensor.

    ros2 run ros2_cuda_ipc_examples preprocess --ros-args -p out_width:=224 -p out_height:=224 -p dtype:=bfloat16

``wait_for_subscribers:=N`` (default 0) subscribes to the camera only once N nodes read ``preprocessed``;
``block_count`` (4) and ``reuse_delay`` (0.01 s before a published block is reused) configure its pool.

Nearest-neighbour resize, RGB order, ``(x / 255 - mean) / std`` per channel, written into a block of its
own ``TensorPublisher`` (in the memory the frames came in) and published as a ``GpuTensor`` on
``preprocessed``: shape (1, 3, rows, cols), ``dim_names`` N, C, H, W, dtype float16 (default), bfloat16 or
float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import NodeParameter
from ros2_cuda_ipc_tensor import TensorPublisher
from ros2_cuda_ipc_tools import run_component

from .arrays import ArrayBackend
from .consumer import ImageConsumer
from .pipeline_node import ParameterError
from .scene import MIN_HEIGHT, MIN_WIDTH, rgb_index

__all__ = ["DTYPES", "IMAGENET_MEAN", "IMAGENET_STD", "Preprocess", "main"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DTYPES = ("float16", "bfloat16", "float32")


class Preprocess(ImageConsumer):
    """Resizes and normalizes each frame into an NCHW tensor published on ``preprocessed``."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("out_height", 224, "rows of the output tensor"),
        NodeParameter("out_width", 224, "columns of the output tensor"),
        NodeParameter("dtype", "float16", "element type of the output tensor"),
        NodeParameter("wait_for_subscribers", 0, "subscribe to the input once this many read the output"),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("preprocess", **kwargs)
        self.tensors: TensorPublisher | None = None  # destroy_node may run on a node whose parameters were refused
        rows = self.parameter("out_height")
        cols = self.parameter("out_width")
        self.dtype = self.parameter("dtype")
        refused = [f"out_height ({rows}) must be at least {MIN_HEIGHT}"] if rows < MIN_HEIGHT else []
        refused += [f"out_width ({cols}) must be at least {MIN_WIDTH}"] if cols < MIN_WIDTH else []
        refused += [f"dtype ({self.dtype!r}) must be one of {', '.join(DTYPES)}"] if self.dtype not in DTYPES else []
        if refused:  # name only the values that are wrong
            raise ParameterError("; ".join(refused))
        self.block_count, self.reuse_delay = self.pool_parameters()
        self.shape = (1, 3, rows, cols)
        self.busy = 0
        self._indices: dict[tuple[int, int, str], tuple[Any, Any, Any, Any]] = {}
        # Subscribe to the camera only once this many read our output (inference may still be loading its network).
        self.subscribe_when_read("preprocessed", self.parameter("wait_for_subscribers"), self.listen)

    def _constants(self, rows: int, cols: int, arrays: ArrayBackend) -> tuple[Any, Any, Any, Any]:
        key = (rows, cols, arrays.name)
        if key not in self._indices:
            out_rows, out_cols = self.shape[2:]
            self._indices[key] = (arrays.upload(np.arange(out_rows) * rows // out_rows),
                                  arrays.upload(np.arange(out_cols) * cols // out_cols),
                                  arrays.upload(np.array(IMAGENET_MEAN, dtype=np.float32) * 255),
                                  arrays.upload(np.array(IMAGENET_STD, dtype=np.float32) * 255))
        return self._indices[key]

    def _publisher(self, memory: str) -> TensorPublisher:
        """The tensor publisher in the memory the frames come in (a new one if that changes)."""
        if self.tensors is not None and self.tensors.pool.memory != memory:
            self.tensors.close()
            self.tensors = None
        if self.tensors is None:
            self.tensors = TensorPublisher(self, "preprocessed", shape=self.shape, dtype=self.dtype,
                                           dim_names=("N", "C", "H", "W"), block_count=self.block_count,
                                           memory=memory, reuse_delay=self.reuse_delay)  # type: ignore[arg-type]
        return self.tensors

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        rows_index, cols_index, mean, std = self._constants(image.shape[0], image.shape[1], arrays)
        frame = self._publisher("cuda" if arrays.on_gpu else "host").borrow()
        if frame is None:
            self.busy += 1  # inference still holds every block: this frame is not passed on
            return
        with frame:
            small = image[rows_index][:, cols_index][:, :, list(rgb_index(encoding))]
            normalized = (arrays.astype(small, np.float32) - mean) / std
            arrays.tensor(frame)[...] = arrays.to_element(arrays.channels_first(normalized), self.dtype)
            frame.publish(arrays.stream, header)
        self.counts["out"] += 1

    def extra_stats(self) -> dict[str, Any]:
        return {**super().extra_stats(), "acquire_misses": self.busy,
                "output": f"GpuTensor {'x'.join(map(str, self.shape))} {self.dtype}"}

    def destroy_node(self) -> None:
        if self.tensors is not None:
            self.tensors.close()
            self.tensors = None
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(Preprocess, argv))


if __name__ == "__main__":
    main()
