"""``OrbitCamera``: looks at a target from a yaw, a pitch and a distance; a mouse drag turns it, the wheel zooms.

ROS axes: x forward, y left, z up.  ``matrix`` is what the point shader multiplies by, ``project``
the same arithmetic in numpy (where a known point must land on screen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["OrbitCamera"]


@dataclass
class OrbitCamera:
    yaw: float = -135.0  #: degrees about z, from +x
    pitch: float = 35.0  #: degrees above the xy plane
    distance: float = 30.0  #: metres from the target
    target: tuple[float, float, float] = (0.0, 0.0, 0.0)
    fov: float = 60.0  #: vertical field of view, degrees
    near: float = 0.1
    far: float = 1000.0
    _drag: tuple[float, float] | None = field(default=None, repr=False)

    def eye(self) -> np.ndarray:
        yaw, pitch = math.radians(self.yaw), math.radians(self.pitch)
        offset = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)])
        return np.asarray(self.target, dtype=np.float64) + self.distance * offset

    def matrix(self, aspect: float) -> np.ndarray:
        """Projection x view, 4x4 float64, row-major (transpose it for GL's column order)."""
        eye, target = self.eye(), np.asarray(self.target, dtype=np.float64)
        forward = (target - eye) / np.linalg.norm(target - eye)
        up = np.array([0.0, 0.0, 1.0])
        side = np.cross(forward, up)
        if np.linalg.norm(side) < 1e-9:  # looking straight down: any side will do
            side = np.array([0.0, -1.0, 0.0])
        side /= np.linalg.norm(side)
        true_up = np.cross(side, forward)
        view = np.eye(4)
        view[0, :3], view[1, :3], view[2, :3] = side, true_up, -forward
        view[:3, 3] = -view[:3, :3] @ eye
        f = 1.0 / math.tan(math.radians(self.fov) / 2)
        n, fa = self.near, self.far
        projection = np.array([[f / aspect, 0, 0, 0], [0, f, 0, 0],
                               [0, 0, (fa + n) / (n - fa), 2 * fa * n / (n - fa)], [0, 0, -1, 0]])
        return projection @ view

    def project(self, points: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """Pixel (column, row from the top) of each (N, 3) point in a ``size`` (width, height) viewport."""
        width, height = size
        homogeneous = np.c_[np.asarray(points, dtype=np.float64), np.ones(len(points))] @ self.matrix(width / height).T
        ndc = homogeneous[:, :2] / homogeneous[:, 3:4]
        return np.c_[(ndc[:, 0] + 1) / 2 * width, (1 - ndc[:, 1]) / 2 * height]

    # Mouse input (window only).
    def press(self, x: float, y: float) -> None:
        self._drag = (x, y)

    def release(self) -> None:
        self._drag = None

    def move(self, x: float, y: float) -> bool:
        """Turn by the drag since the last move; True when the view changed."""
        if self._drag is None:
            return False
        dx, dy = x - self._drag[0], y - self._drag[1]
        self._drag = (x, y)
        self.yaw -= dx * 0.3
        self.pitch = max(-89.0, min(89.0, self.pitch + dy * 0.3))
        return True

    def zoom(self, steps: float) -> None:
        self.distance = max(0.5, self.distance * 0.9 ** steps)
