"""The encoder's checksum, computed its fast way, against the formula written out pixel by pixel."""

import numpy as np
import pytest

from ros2_cuda_ipc_examples.nodes.arrays import ArrayBackend
from ros2_cuda_ipc_examples.nodes.encoder import luma_checksum, luma_constants


def _oracle(pixels: np.ndarray, red: int, green: int, blue: int) -> int:
    total = 0
    for row in pixels.tolist():
        for column, pixel in enumerate(row):
            luma = (77 * pixel[red] + 150 * pixel[green] + 29 * pixel[blue]) // 256
            total += luma * (column % 251 + 1)
    return total % 2**64


@pytest.mark.parametrize(("encoding", "channels", "order"), [("rgb8", 3, (0, 1, 2)), ("bgra8", 4, (2, 1, 0))])
def test_the_checksum_is_the_column_weighted_luma_of_the_downscaled_picture(encoding, channels, order):
    arrays = ArrayBackend("numpy")
    picture = np.random.default_rng(7).integers(0, 256, size=(37, 300, channels), dtype=np.uint8)
    small = picture[::4, ::4]
    got = luma_checksum(small, *luma_constants(small.shape[1], encoding, arrays), arrays)
    assert got == _oracle(small, *order)
    assert got != _oracle(small, *order[::-1])  # the channel order matters: the test can tell them apart
