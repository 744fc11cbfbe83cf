"""Voxel-grid downsampling: the numpy reference here; torch against it in test_pointcloud_cuda.py."""

import numpy as np
import pytest

from ros2_cuda_ipc_pointcloud import numpy_voxel_downsample


def test_each_occupied_cell_becomes_the_centroid_of_its_points():
    xyz = np.array([[0.05, 0.05, 0.05], [0.15, 0.1, 0.1], [0.5, 0.5, 0.5], [-0.1, 0.0, 0.0]], np.float32)
    centroids, counts = numpy_voxel_downsample(xyz, 0.2)
    assert counts.tolist() == [1, 2, 1]  # sorted by (x, y, z) cell: (-1, 0, 0), (0, 0, 0), (2, 2, 2)
    np.testing.assert_allclose(centroids, [[-0.1, 0.0, 0.0], [0.1, 0.075, 0.075], [0.5, 0.5, 0.5]], rtol=1e-6)
    assert centroids.dtype == np.float32


def test_counts_cover_every_point_and_bad_voxels_are_refused():
    xyz = np.random.default_rng(0).uniform(-5, 5, (10_000, 3)).astype(np.float32)
    centroids, counts = numpy_voxel_downsample(xyz, 1.0)
    assert counts.sum() == 10_000 and len(centroids) == len(counts) <= 1000
    with pytest.raises(ValueError, match="positive"):
        numpy_voxel_downsample(xyz, 0.0)
