"""``EncoderLike``: what a video encoder's front end does to each frame: luma, downscaled, and a checksum.

    ros2 run ros2_cuda_ipc_examples encoder_like --ros-args -p downscale:=4

BT.601 luma of every ``downscale``-th pixel in both directions, computed where the frame lies
(GPU or host), and a position-weighted checksum of it published on ``checksum`` (``std_msgs/UInt64``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from std_msgs.msg import UInt64

from ros2_cuda_ipc_core import NodeParameter
from ros2_cuda_ipc_tools import run_component

from .arrays import ArrayBackend
from .consumer import ImageConsumer
from .pipeline_node import ParameterError
from .scene import rgb_index

__all__ = ["EncoderLike", "luma_checksum", "luma_constants", "main"]


class EncoderLike(ImageConsumer):
    """Luma downscale and checksum of each frame from ``image``."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("downscale", 4, "luma downscale factor (at least 1)"),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("encoder_like", **kwargs)
        self.downscale = self.parameter("downscale")
        if self.downscale < 1:
            raise ParameterError(f"downscale must be at least 1, not {self.downscale}")
        self._checksums = self.create_publisher(UInt64, "checksum", 10)
        self._constants: dict[tuple[int, str, str], tuple[Any, Any]] = {}
        self.listen()

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        small = image[:: self.downscale, :: self.downscale]
        key = (small.shape[1], encoding, arrays.name)
        if key not in self._constants:
            self._constants[key] = luma_constants(small.shape[1], encoding, arrays)
        checksum = luma_checksum(small, *self._constants[key], arrays)
        self._checksums.publish(UInt64(data=checksum))
        self.counts["out"] += 1


def luma_constants(columns: int, encoding: str, arrays: ArrayBackend) -> tuple[Any, Any]:
    """The BT.601 weights of a pixel's channels in ``encoding``'s order, and the checksum's column weights."""
    weights = np.zeros(3, dtype=np.int64)
    weights[list(rgb_index(encoding))] = (77, 150, 29)
    return arrays.upload(weights), arrays.arange(columns) % 251 + 1


def luma_checksum(pixels: Any, channel_weights: Any, column_weights: Any, arrays: ArrayBackend) -> int:
    """The column-weighted sum of the integer luma ``(77 R + 150 G + 29 B) // 256`` of (rows, cols, 3+) ``pixels``,
    modulo 2**64.  Five kernels on a GPU (the uint8 pixels promote to int64 in the first): each launch costs a
    reader tens of µs of CPU a frame, more than the arithmetic."""
    luma = (pixels[:, :, :3] * channel_weights).sum(-1) // 256
    return int(arrays.download((luma * column_weights).sum())) & 0xFFFFFFFFFFFFFFFF


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(EncoderLike, argv))


if __name__ == "__main__":
    main()
