"""Every fixed-layout sensor_msgs encoding maps to a dtype and channel count and back."""

import numpy as np
import pytest

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_image import ENCODINGS, encoding_layout, generic_encoding
from ros2_cuda_ipc_image.encodings import DTYPE_CODES, check_consistent, dtype_code

EXPECTED = {
    "rgb8": ("u1", 3), "rgba8": ("u1", 4), "bgr8": ("u1", 3), "bgra8": ("u1", 4), "mono8": ("u1", 1),
    "mono16": ("u2", 1), "rgb16": ("u2", 3), "rgba16": ("u2", 4), "bgr16": ("u2", 3), "bgra16": ("u2", 4),
    "bayer_rggb8": ("u1", 1), "bayer_bggr8": ("u1", 1), "bayer_gbrg8": ("u1", 1), "bayer_grbg8": ("u1", 1),
    "bayer_rggb16": ("u2", 1), "bayer_bggr16": ("u2", 1), "bayer_gbrg16": ("u2", 1), "bayer_grbg16": ("u2", 1),
    "yuv422": ("u1", 2), "yuv422_yuy2": ("u1", 2), "uyvy": ("u1", 2), "yuyv": ("u1", 2),
    **{f"{d}C{n}": (t, n) for d, t in [("8U", "u1"), ("8S", "i1"), ("16U", "u2"), ("16S", "i2"), ("32S", "i4"),
                                       ("32F", "f4"), ("64F", "f8")] for n in (1, 2, 3, 4)},
}


@pytest.mark.parametrize("encoding", sorted(EXPECTED))
def test_both_directions(encoding):
    dtype, channels = encoding_layout(encoding)
    assert (dtype, channels) == (np.dtype(EXPECTED[encoding][0]), EXPECTED[encoding][1])
    check_consistent(encoding, dtype, channels)  # and back: the pair is accepted for the name
    assert DTYPE_CODES[dtype_code(dtype)] == dtype  # every element type travels in GpuImage.dtype
    generic = generic_encoding(dtype, channels)
    assert encoding_layout(generic) == (dtype, channels)


def test_table_is_exactly_the_expected_set():
    assert set(ENCODINGS) == set(EXPECTED)


@pytest.mark.parametrize("encoding", ["nv21", "jpeg", "", "RGB8"])
def test_unknown_encodings_are_refused(encoding):
    with pytest.raises(InvalidDescriptorError, match="fixed element type"):
        encoding_layout(encoding)


def test_inconsistent_pairs_are_refused():
    with pytest.raises(InvalidDescriptorError, match="rgb8"):
        check_consistent("rgb8", np.dtype(np.uint16), 3)
    with pytest.raises(InvalidDescriptorError):
        check_consistent("mono16", np.dtype(np.uint16), 3)
    assert generic_encoding(np.dtype(np.float16), 1) is None
