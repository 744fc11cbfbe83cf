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

__all__ = ["EncoderLike", "main"]


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
        self._weights: dict[tuple[int, int, str, str], tuple[Any, Any]] = {}
        self.listen()

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        small = arrays.astype(image[:: self.downscale, :: self.downscale], "int64")
        coefficients, weights = self._constants(small.shape[1], small.shape[2], encoding, arrays)
        luma = (small * coefficients).sum(-1) // 256  # few kernels: each is a launch's CPU on the GPU
        checksum = int(arrays.download((luma * weights).sum())) & 0xFFFFFFFFFFFFFFFF
        self._checksums.publish(UInt64(data=checksum))
        self.counts["out"] += 1

    def _constants(self, columns: int, channels: int, encoding: str, arrays: ArrayBackend) -> tuple[Any, Any]:
        """BT.601's integer luma coefficients at the encoding's red, green and blue, and the checksum's column
        weights: made once per layout, where the frame lies."""
        key = (columns, channels, encoding, arrays.name)
        if key not in self._weights:
            coefficients = np.zeros(channels, dtype=np.int64)
            coefficients[list(rgb_index(encoding))] = (77, 150, 29)
            self._weights[key] = (arrays.upload(coefficients), arrays.arange(columns) % 251 + 1)
        return self._weights[key]


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(EncoderLike, argv))


if __name__ == "__main__":
    main()
