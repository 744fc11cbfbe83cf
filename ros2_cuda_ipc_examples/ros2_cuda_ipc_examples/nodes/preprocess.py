"""``Preprocess``: camera frames to the usual DNN input, a planar (NCHW) normalized float tensor.

    ros2 run ros2_cuda_ipc_examples preprocess --ros-args -p out_width:=224 -p out_height:=224 -p dtype:=float16

``wait_for_subscribers:=N`` (default 0) subscribes to the camera only once N nodes read ``preprocessed``;
``block_count`` (4) and ``reuse_delay`` (0.01 s before a published block is reused) configure its pool.

Nearest-neighbour resize, RGB order, ``(x / 255 - mean) / std`` per channel, written channel
after channel into a block of its own pool (in the memory the frames came in) and republished
as a ``GpuImage`` on ``preprocessed``: shape (rows, cols, 3) with planar strides, dtype float32
(encoding ``32FC3``) or float16.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import BlockManager
from ros2_cuda_ipc_image import ImageLayout
from ros2_cuda_ipc_msgs.msg import GpuImage
from ros2_cuda_ipc_tools import run_component

from .arrays import ArrayBackend
from .consumer import ImageConsumer
from .pipeline_node import ParameterError
from .scene import MIN_HEIGHT, MIN_WIDTH, rgb_index

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "Preprocess", "main", "planar_layout"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DTYPES: dict[str, np.dtype] = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}


def planar_layout(rows: int, cols: int, dtype: np.dtype) -> ImageLayout:
    """(rows, cols, 3) stored channel after channel: the memory of a 1 x 3 x rows x cols NCHW tensor."""
    item = dtype.itemsize
    return ImageLayout((rows, cols, 3), (cols * item, item, rows * cols * item), dtype,
                       "32FC3" if dtype == np.float32 else "")


class Preprocess(ImageConsumer):
    """Resizes and normalizes each frame into a planar tensor published on ``preprocessed``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("preprocess", **kwargs)
        self.pool: BlockManager | None = None  # destroy_node may run on a node whose parameters were refused
        rows = self.parameter("out_height", 224)
        cols = self.parameter("out_width", 224)
        dtype = self.parameter("dtype", "float32")
        if rows < MIN_HEIGHT or cols < MIN_WIDTH or dtype not in DTYPES:
            raise ParameterError(f"out_height ({rows}) must be at least {MIN_HEIGHT}, out_width ({cols}) at least "
                                 f"{MIN_WIDTH}, dtype ({dtype!r}) one of {', '.join(DTYPES)}")
        self.block_count, self.reuse_delay = self.pool_parameters()
        self.layout = planar_layout(rows, cols, DTYPES[dtype])
        self.busy = 0
        self._out = self.create_publisher(GpuImage, "preprocessed", 10)
        self._indices: dict[tuple[int, int, str], tuple[Any, Any, Any, Any]] = {}
        # Subscribe to the camera only once this many read our output (inference may still be loading its network).
        self.subscribe_when_read("preprocessed", self.parameter("wait_for_subscribers", 0), self.listen)

    def _constants(self, rows: int, cols: int, arrays: ArrayBackend) -> tuple[Any, Any, Any, Any]:
        key = (rows, cols, arrays.name)
        if key not in self._indices:
            out_rows, out_cols, _ = self.layout.shape
            self._indices[key] = (arrays.upload(np.arange(out_rows) * rows // out_rows),
                                  arrays.upload(np.arange(out_cols) * cols // out_cols),
                                  arrays.upload(np.array(IMAGENET_MEAN, dtype=np.float32) * 255),
                                  arrays.upload(np.array(IMAGENET_STD, dtype=np.float32) * 255))
        return self._indices[key]

    def _pool(self, memory: str) -> BlockManager:
        if self.pool is not None and self.pool.memory != memory:
            self.pool.close()
            self.pool = None
        if self.pool is None:
            self.pool = BlockManager(self.layout.byte_extent, block_count=self.block_count,
                                     memory=memory, reuse_delay=self.reuse_delay)  # type: ignore[arg-type]
        return self.pool

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        rows_index, cols_index, mean, std = self._constants(image.shape[0], image.shape[1], arrays)
        block = self._pool("cuda" if arrays.on_gpu else "host").acquire_for_publish()
        if block is None:
            self.busy += 1  # inference still holds every block: this frame is not passed on
            return
        with block:
            small = image[rows_index][:, cols_index][:, :, list(rgb_index(encoding))]
            tensor = (arrays.astype(small, np.float32) - mean) / std
            out = block.view(self.layout.shape, self.layout.dtype, self.layout.strides)
            target = out if not arrays.on_gpu else arrays.xp.from_dlpack(out)
            target[...] = arrays.astype(tensor, self.layout.dtype)
            msg = GpuImage(header=header)
            self.layout.fill_message(msg)
            msg.core = block.prepare_publish(arrays.stream, self.layout.byte_extent)
        self._out.publish(msg)
        self.counts["out"] += 1

    def extra_stats(self) -> dict[str, Any]:
        return {**super().extra_stats(), "acquire_misses": self.busy}

    def destroy_node(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(Preprocess, argv))


if __name__ == "__main__":
    main()
