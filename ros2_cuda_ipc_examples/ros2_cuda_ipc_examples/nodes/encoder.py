"""``EncoderLike``: what a video encoder's front end does to each frame: luma, downscaled, and a checksum.

    ros2 run ros2_cuda_ipc_examples encoder_like --ros-args -p downscale:=4

BT.601 luma of every ``downscale``-th pixel in both directions, computed where the frame lies
(GPU or host), and a position-weighted checksum of it published on ``checksum`` (``std_msgs/UInt64``).
"""

from __future__ import annotations

from typing import Any

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
        self._weights: dict[tuple[int, str], Any] = {}
        self.listen()

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        small = arrays.astype(image[:: self.downscale, :: self.downscale], "int64")
        r, g, b = rgb_index(encoding)
        luma = (77 * small[:, :, r] + 150 * small[:, :, g] + 29 * small[:, :, b]) // 256
        key = (luma.shape[1], arrays.name)
        if key not in self._weights:
            self._weights[key] = arrays.arange(luma.shape[1]) % 251 + 1
        checksum = int(arrays.download((luma * self._weights[key]).sum())) & 0xFFFFFFFFFFFFFFFF
        self._checksums.publish(UInt64(data=checksum))
        self.counts["out"] += 1


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(EncoderLike, argv))


if __name__ == "__main__":
    main()
