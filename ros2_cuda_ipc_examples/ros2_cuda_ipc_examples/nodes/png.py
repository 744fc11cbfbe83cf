"""A PNG file from an RGB or RGBA uint8 array: the format is zlib and a few CRC'd chunks."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np

__all__ = ["read_png", "write_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {3: 2, 4: 6}  # channels -> PNG colour type (truecolour, truecolour with alpha)
_NONE, _UP = 0, 2  # PNG row filters


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_png(path: str | os.PathLike[str], pixels: np.ndarray, level: int = 1) -> None:
    """Write (rows, cols, 3 or 4) uint8 ``pixels`` to ``path``, atomically (a reader never sees half a file)."""
    rows, cols, channels = pixels.shape
    if pixels.dtype != np.uint8 or channels not in _COLOR_TYPES:
        raise ValueError(f"a PNG is written from (rows, cols, 3 or 4) uint8 pixels, not {pixels.shape} {pixels.dtype}")
    flat = pixels.reshape(rows, cols * channels)
    scanlines = np.empty((rows, 1 + cols * channels), dtype=np.uint8)
    scanlines[:, 0] = _UP  # each row stored as its difference to the row above: smooth pictures compress well
    scanlines[0, 1:] = flat[0]
    np.subtract(flat[1:], flat[:-1], out=scanlines[1:, 1:])  # uint8 arithmetic wraps modulo 256, as PNG's does
    header = struct.pack(">IIBBBBB", cols, rows, 8, _COLOR_TYPES[channels], 0, 0, 0)
    data = _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(scanlines.tobytes(), level)) \
        + _chunk(b"IEND", b"")
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    partial.replace(target)


def read_png(path: str | os.PathLike[str]) -> np.ndarray:
    """The pixels of a PNG that :func:`write_png` wrote (8-bit RGB / RGBA, None or Up filters): for checks and tests."""
    data = Path(path).read_bytes()
    if not data.startswith(_SIGNATURE):
        raise ValueError(f"{path} is not a PNG file")
    pos, idat, header = len(_SIGNATURE), b"", b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos: pos + 4]), data[pos + 4: pos + 8]
        body = data[pos + 8: pos + 8 + length]
        header, idat = (body, idat) if kind == b"IHDR" else (header, idat + body if kind == b"IDAT" else idat)
        pos += 12 + length
    cols, rows, depth, color, _, _, _ = struct.unpack(">IIBBBBB", header)
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None:
        raise ValueError(f"{path}: only 8-bit RGB / RGBA PNGs are read here")
    scanlines = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(rows, 1 + cols * channels)
    if not np.isin(scanlines[:, 0], (_NONE, _UP)).all():
        raise ValueError(f"{path}: only the None and Up row filters are read here")
    pixels = scanlines[:, 1:].copy()
    for row in range(1, rows):
        if scanlines[row, 0] == _UP:
            pixels[row] += pixels[row - 1]  # wraps modulo 256
    return pixels.reshape(rows, cols, channels)
