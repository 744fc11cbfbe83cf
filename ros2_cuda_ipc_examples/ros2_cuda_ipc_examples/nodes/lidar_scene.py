"""The synthetic LiDAR's scene, and how a consumer checks a cloud of it.

A spinning sensor in a round room whose wall breathes: the range of column ``c`` in scan ``seq``
is ``8 + 3 sin(3 az + 0.2 seq)`` metres, ``az`` the column's azimuth (turning with ``seq``), for
``rings`` elevations from -15 to +15 degrees. x, y, z follow; the intensity of every point is the
scan number, so a consumer knows which scan it holds and checks sampled points against the formula
(within a millimetre: the GPU's sine and numpy's differ in the last bits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .arrays import ArrayBackend

__all__ = ["RANGE_LIMITS", "LidarProbe", "LidarScene", "lidar_points"]

#: Nearest and farthest point from the sensor's axis (metres, horizontal distance).
RANGE_LIMITS = (5.0 * float(np.cos(np.radians(15.0))), 11.0)
_TURN = 0.05  # radians of azimuth per scan
_ELEVATION = np.radians(15.0)
_TOLERANCE = 1e-3  # metres


def _angles(rings: int, columns: int) -> tuple[np.ndarray, np.ndarray]:
    elevation = np.linspace(-_ELEVATION, _ELEVATION, rings, dtype=np.float32)
    azimuth = (2 * np.pi * np.arange(columns) / columns).astype(np.float32)
    return elevation, azimuth


def lidar_points(seq: int, elevation: Any, azimuth: Any, xp: Any = np) -> tuple[Any, Any, Any]:
    """x, y, z (float32) of scan ``seq`` at the given elevations (column vector) and static azimuths (row)."""
    turned = azimuth + np.float32(_TURN * (seq % 100_000))
    reach = 8.0 + 3.0 * xp.sin(3.0 * azimuth + np.float32(0.2 * (seq % 100_000)))
    flat = reach * xp.cos(elevation)
    return flat * xp.cos(turned), flat * xp.sin(turned), reach * xp.sin(elevation)


class LidarScene:
    """Writes scan ``seq`` of a ``rings`` x ``columns`` organized cloud into an (rings, columns, 4) float32 array."""

    def __init__(self, rings: int, columns: int, backend: ArrayBackend) -> None:
        if rings < 1 or columns < 8:
            raise ValueError(f"a scan needs at least 1 ring and 8 columns, not {rings} x {columns}")
        self.rings, self.columns, self.backend = rings, columns, backend
        elevation, azimuth = _angles(rings, columns)
        self._elevation = backend.upload(elevation[:, None])
        self._azimuth = backend.upload(azimuth[None, :])

    def render(self, out: Any, seq: int) -> None:
        x, y, z = lidar_points(seq, self._elevation, self._azimuth, self.backend.xp)
        out[:, :, 0] = x
        out[:, :, 1] = y
        out[:, :, 2] = z
        out[:, :, 3] = float(seq)


@dataclass(frozen=True)
class LidarProbe:
    """Sampled (ring, column) points of a rings x columns scan and their expected coordinates per scan."""

    rings_index: np.ndarray
    columns_index: np.ndarray
    elevation: np.ndarray
    azimuth: np.ndarray

    @classmethod
    def for_scan(cls, rings: int, columns: int) -> LidarProbe:
        rng = np.random.default_rng(rings * 100_003 + columns)
        ring_index, column_index = rng.integers(0, rings, 32), rng.integers(0, columns, 32)
        elevation, azimuth = _angles(rings, columns)
        return cls(ring_index, column_index, elevation[ring_index], azimuth[column_index])

    def check(self, xyzi: np.ndarray) -> tuple[int, bool]:
        """(scan number, whether the samples match it) from the sampled points' (x, y, z, intensity)."""
        seq = int(xyzi[0, 3])
        x, y, z = lidar_points(seq, self.elevation, self.azimuth)
        expected = np.stack([x, y, z], axis=1)
        good = bool(np.all(xyzi[:, 3] == seq) and np.all(np.abs(xyzi[:, :3] - expected) <= _TOLERANCE))
        return seq, good
