"""The synthetic camera's picture, and how every consumer checks a frame of it.

A frame is a moving plaid (red scrolls across, green down, blue along the diagonal), a barcode
of the frame number across the top and the number in digits at the bottom left. Every value
is a function of the pixel and the frame number, so a consumer reads the number from the
barcode and checks sampled pixels against the formula: a wrong, torn or stale frame shows.
The barcode cells and the plaid's slopes survive a nearest-neighbour resize, so a resized
copy (the DNN input) is checked the same way, within a tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import DEFAULT_MAX_FRAME_BYTES

from .arrays import ArrayBackend

__all__ = ["BITS", "MAX_FRAME_BYTES", "MIN_HEIGHT", "MIN_WIDTH", "RGB_INDEX", "Probe", "Scene", "plaid", "rgb_index"]

#: Frame-number bits in the barcode (frames count modulo 2**BITS).
BITS = 24
#: The smallest picture whose barcode cells and digits stay readable.
MIN_WIDTH, MIN_HEIGHT = 96, 64
#: The largest frame drawn (8K rgba8 is 127 MiB): what a bridge passes by default.
MAX_FRAME_BYTES = DEFAULT_MAX_FRAME_BYTES
#: The plaid's coordinates run over 512 steps per image side; triangle waves of this period.
_STEPS, _PERIOD = 512, 510
_SPEED = (6, 4, 8)  # plaid steps per frame: red, green, blue
#: The encodings the camera draws, and where red, green and blue are in each.
RGB_INDEX = {"rgb8": (0, 1, 2), "bgr8": (2, 1, 0), "rgba8": (0, 1, 2), "bgra8": (2, 1, 0)}

_FONT = {  # 3 x 5 digits, rows top to bottom
    "0": ("111", "101", "101", "101", "111"), "1": ("010", "110", "010", "010", "111"),
    "2": ("111", "001", "111", "100", "111"), "3": ("111", "001", "111", "001", "111"),
    "4": ("101", "101", "111", "001", "001"), "5": ("111", "100", "111", "001", "111"),
    "6": ("111", "100", "111", "101", "111"), "7": ("111", "001", "010", "010", "010"),
    "8": ("111", "101", "111", "101", "111"), "9": ("111", "101", "111", "001", "111"),
}


def rgb_index(encoding: str) -> tuple[int, int, int]:
    """Where red, green and blue are in a pixel of ``encoding`` (RGB order for anything else: tensors)."""
    return RGB_INDEX.get(encoding, (0, 1, 2))


def _triangle(t: Any) -> Any:
    """0..255..0 over _PERIOD steps: continuous, so a resize moves a value by at most its slope."""
    return 255 - abs(t % _PERIOD - 255)


def plaid(seq: int, a: Any, b: Any) -> tuple[Any, Any, Any]:
    """Red, green and blue of the plaid at plaid coordinates ``a`` (across) and ``b`` (down) in frame ``seq``."""
    return (_triangle(a + _SPEED[0] * seq), _triangle(b + _SPEED[1] * seq),
            _triangle((a + b) // 2 + _SPEED[2] * seq))


class Scene:
    """Draws frame ``seq`` of a ``width`` x ``height`` picture in ``encoding`` (see RGB_INDEX) into a backend array."""

    def __init__(self, width: int, height: int, backend: ArrayBackend, encoding: str = "rgb8") -> None:
        if width < MIN_WIDTH or height < MIN_HEIGHT:
            raise ValueError(f"{width}x{height} is below the smallest picture, {MIN_WIDTH}x{MIN_HEIGHT}")
        if encoding not in RGB_INDEX:
            raise ValueError(f"encoding {encoding!r} is not one of {', '.join(RGB_INDEX)}")
        self.channels = 4 if encoding.endswith("a8") else 3
        if width * height * self.channels > MAX_FRAME_BYTES:  # before a byte is allocated: its tables are 8 per pixel
            raise ValueError(f"{width}x{height} {encoding} is {width * height * self.channels} bytes a frame, more than "
                             f"the {MAX_FRAME_BYTES >> 20} MiB the scene draws (the bridges' max_frame_bytes)")
        self.width, self.height, self.backend = width, height, backend
        self.rgb_index = RGB_INDEX[encoding]
        a = np.arange(width, dtype=np.int64) * _STEPS // width
        b = np.arange(height, dtype=np.int64) * _STEPS // height
        self._a = backend.upload(a % _PERIOD)
        self._b = backend.upload(b % _PERIOD)
        self._diagonal = backend.upload(((a[None, :] + b[:, None]) // 2) % _PERIOD)
        self._steps = np.arange(_PERIOD, dtype=np.int64)
        self.bar_rows = max(2, height // 16)
        self.digit_scale = max(1, height // 120)

    def render(self, out: Any, seq: int) -> None:
        """Fill ``out`` ((height, width, channels) uint8, writable) with frame ``seq``."""
        backend = self.backend
        red, green, blue = (backend.upload(lut.astype(np.uint8)) for lut in plaid(seq, self._steps, self._steps))
        r, g, b = self.rgb_index
        out[:, :, r] = red[self._a]
        out[:, :, g] = green[self._b][:, None]
        out[:, :, b] = blue[self._diagonal]
        out[: self.bar_rows] = backend.upload(self._barcode_row(seq))[None, :, None]
        digits = self._digits(seq)
        s = self.digit_scale
        top, left = self.height - 8 * s, 2 * s
        out[top: top + digits.shape[0], left: left + digits.shape[1]] = backend.upload(digits)[:, :, None]
        if self.channels == 4:
            out[:, :, 3] = 255

    def _barcode_row(self, seq: int) -> np.ndarray:
        cell = np.arange(self.width) * BITS // self.width
        bits = (seq % (1 << BITS)) >> (BITS - 1 - cell) & 1
        return (bits * 255).astype(np.uint8)

    def _digits(self, seq: int) -> np.ndarray:
        text = str(seq)[-(self.width // (5 * self.digit_scale)):]
        glyphs = np.zeros((7, 4 * len(text) + 1), dtype=np.uint8)
        for i, digit in enumerate(text):
            glyphs[1:6, 1 + 4 * i: 4 + 4 * i] = [[255 * (c == "1") for c in row] for row in _FONT[digit]]
        s = self.digit_scale
        return np.kron(glyphs, np.ones((s, s), dtype=np.uint8))


@dataclass(frozen=True)
class Probe:
    """Where a consumer looks in a (rows, cols) copy of a frame: the barcode cells, then plaid samples.

    ``resized`` copies (nearest-neighbour, from a source at least MIN_WIDTH x MIN_HEIGHT) are
    checked within the plaid's slope over one source or destination pixel.
    """

    ys: np.ndarray
    xs: np.ndarray
    a: np.ndarray
    b: np.ndarray
    tolerance: float

    @classmethod
    def for_image(cls, rows: int, cols: int, resized: bool = False) -> Probe:
        bar_y = np.full(BITS, rows // 32)
        bar_x = (2 * np.arange(BITS) + 1) * cols // (2 * BITS)
        grid_x = (np.array([0.15, 0.38, 0.62, 0.85]) * cols).astype(np.int64)
        grid_y = (np.array([0.3, 0.45, 0.6, 0.7]) * rows).astype(np.int64)
        xs, ys = (m.ravel() for m in np.meshgrid(grid_x, grid_y))
        tolerance = (_STEPS / min(rows, cols, MIN_HEIGHT) + 3) if resized else 0.0
        return cls(np.concatenate([bar_y, ys]), np.concatenate([bar_x, xs]),
                   xs * _STEPS // cols, ys * _STEPS // rows, tolerance)

    def check(self, values: np.ndarray, order: tuple[int, int, int] = (0, 1, 2)) -> tuple[int, bool]:
        """(frame number, whether the samples match it) from ``values[i]`` = the pixel (0..255) at (ys[i], xs[i]).

        ``order`` says which of the pixel's channels are red, green and blue.
        """
        values = np.asarray(values, dtype=np.float64)[:, list(order)]
        bits = values[:BITS, 0] > 127.5
        seq = int(np.sum(bits.astype(np.int64) << np.arange(BITS - 1, -1, -1)))
        expected = np.stack(plaid(seq, self.a, self.b), axis=1)
        return seq, bool(np.all(np.abs(values[BITS:] - expected) <= self.tolerance))
