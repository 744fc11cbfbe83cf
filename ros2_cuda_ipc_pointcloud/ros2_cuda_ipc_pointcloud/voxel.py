"""Voxel-grid downsampling: every occupied cell of a grid becomes the centroid of its points.

``voxel_downsample`` runs on torch tensors (GPU or CPU; torch is imported when called, as an optional
consumer); ``numpy_voxel_downsample`` is the same on the host, the reference the example checks against.
Both return voxels sorted by their (x, y, z) cell, so their results compare one to one.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def voxel_downsample(xyz: Any, voxel: float) -> tuple[Any, Any]:
    """(centroids (M, 3) float32, counts (M,) int64) of the ``voxel``-metre cells an (N, 3) float32 tensor occupies.

    ``xyz`` may be any strided view (``torch.from_dlpack(view.xyz)``, say); results are on its device.
    Cells are ``floor(xyz * (1 / voxel))`` in float32, a product numpy rounds the same way.
    """
    try:
        import torch
    except ImportError:
        raise ImportError("voxel_downsample needs PyTorch (pip install torch); it is an optional consumer") from None
    if voxel <= 0:
        raise ValueError(f"voxel must be positive, not {voxel}")
    if len(xyz) == 0:
        return torch.empty((0, 3), dtype=torch.float32, device=xyz.device), torch.empty(0, dtype=torch.int64,
                                                                                       device=xyz.device)
    cells = torch.floor(xyz * (1.0 / voxel)).to(torch.int64)
    cells -= cells.min(dim=0).values
    extent = cells.max(dim=0).values + 1
    keys = (cells[:, 0] * extent[1] + cells[:, 1]) * extent[2] + cells[:, 2]
    _, inverse, counts = torch.unique(keys, return_inverse=True, return_counts=True)
    sums = torch.zeros((len(counts), 3), dtype=torch.float64, device=xyz.device).index_add_(0, inverse, xyz.double())
    return (sums / counts[:, None]).float(), counts


def numpy_voxel_downsample(xyz: np.ndarray, voxel: float) -> tuple[np.ndarray, np.ndarray]:
    """The same for an (N, 3) float32 numpy array."""
    if voxel <= 0:
        raise ValueError(f"voxel must be positive, not {voxel}")
    cells = np.floor(xyz * np.float32(1.0 / voxel)).astype(np.int64)
    _, inverse, counts = np.unique(cells, axis=0, return_inverse=True, return_counts=True)
    sums = np.zeros((len(counts), 3))
    np.add.at(sums, inverse.reshape(-1), xyz.astype(np.float64))
    return (sums / counts[:, None]).astype(np.float32), counts
