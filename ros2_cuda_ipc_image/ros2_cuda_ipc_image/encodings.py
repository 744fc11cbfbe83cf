"""Image element types and ``sensor_msgs/image_encodings`` names, in both directions.

Only encodings with a fixed element type and channel count are known here: the colour and mono
encodings, the OpenCV-style ``{8U,8S,16U,16S,32S,32F,64F}C{1..4}``, Bayer 8/16 bit, and the
packed 2-byte YUV 4:2:2 encodings as two 8-bit channels.
"""

from __future__ import annotations

import numpy as np

from ros2_cuda_ipc_core import InvalidDescriptorError
from ros2_cuda_ipc_msgs.msg import GpuImage

#: GpuImage.dtype code <-> numpy dtype.
DTYPE_CODES: dict[int, np.dtype] = {
    GpuImage.DTYPE_U8: np.dtype(np.uint8), GpuImage.DTYPE_U16: np.dtype(np.uint16),
    GpuImage.DTYPE_F16: np.dtype(np.float16), GpuImage.DTYPE_F32: np.dtype(np.float32),
    GpuImage.DTYPE_F64: np.dtype(np.float64), GpuImage.DTYPE_S8: np.dtype(np.int8),
    GpuImage.DTYPE_S16: np.dtype(np.int16), GpuImage.DTYPE_S32: np.dtype(np.int32),
}
CODES_BY_DTYPE = {dtype: code for code, dtype in DTYPE_CODES.items()}

_DEPTHS = {"8U": np.uint8, "8S": np.int8, "16U": np.uint16, "16S": np.int16, "32S": np.int32,
           "32F": np.float32, "64F": np.float64}
ENCODINGS: dict[str, tuple[np.dtype, int]] = {
    **{name: (np.dtype(np.uint8), n) for name, n in
       [("rgb8", 3), ("rgba8", 4), ("bgr8", 3), ("bgra8", 4), ("mono8", 1)]},
    **{name: (np.dtype(np.uint16), n) for name, n in
       [("rgb16", 3), ("rgba16", 4), ("bgr16", 3), ("bgra16", 4), ("mono16", 1)]},
    **{f"bayer_{order}{bits}": (np.dtype(np.uint8 if bits == 8 else np.uint16), 1)
       for order in ("rggb", "bggr", "gbrg", "grbg") for bits in (8, 16)},
    **{name: (np.dtype(np.uint8), 2) for name in ("yuv422", "yuv422_yuy2", "uyvy", "yuyv")},
    **{f"{depth}C{n}": (np.dtype(dtype), n) for depth, dtype in _DEPTHS.items() for n in (1, 2, 3, 4)},
}


def encoding_layout(encoding: str) -> tuple[np.dtype, int]:
    """(element dtype, channels) of a ``sensor_msgs`` encoding; InvalidDescriptorError if it has none fixed."""
    try:
        return ENCODINGS[encoding]
    except KeyError:
        raise InvalidDescriptorError(f"encoding {encoding!r} has no fixed element type and channel count; "
                                     f"known: {', '.join(sorted(ENCODINGS))}") from None


def generic_encoding(dtype: np.dtype, channels: int) -> str | None:
    """The OpenCV-style name (``8UC3``, ``32FC1``, ...) for an element type and channel count, if any."""
    for depth, depth_dtype in _DEPTHS.items():
        if np.dtype(depth_dtype) == dtype and 1 <= channels <= 4:
            return f"{depth}C{channels}"
    return None


def dtype_code(dtype: np.dtype) -> int:
    try:
        return CODES_BY_DTYPE[np.dtype(dtype)]
    except KeyError:
        raise InvalidDescriptorError(f"dtype {dtype} is not one GpuImage carries "
                                     f"({', '.join(str(d) for d in DTYPE_CODES.values())})") from None


def check_consistent(encoding: str, dtype: np.dtype, channels: int) -> None:
    """An encoding, when given, must agree with the element type and channel count."""
    if not encoding:
        return
    want_dtype, want_channels = encoding_layout(encoding)
    if (want_dtype, want_channels) != (np.dtype(dtype), channels):
        raise InvalidDescriptorError(f"encoding {encoding!r} means {want_channels} x {want_dtype}, "
                                     f"the image says {channels} x {np.dtype(dtype)}")
