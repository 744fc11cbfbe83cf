"""Test clouds for every layout the issue names, with known values in every field and noise in every padding byte.

``SAMPLES`` maps a case name to publisher-style arguments (the capacity) and the number of points a
message carries; ``sample_bytes`` fills a cloud's ``PointCloud2.data`` deterministically.
"""

from __future__ import annotations

import array
from dataclasses import dataclass

import numpy as np
from sensor_msgs.msg import PointCloud2

from ros2_cuda_ipc_pointcloud import CloudLayout


@dataclass(frozen=True)
class Sample:
    """A capacity (what a publisher is created with) and the points one message carries."""

    fields: str
    width: int
    height: int = 1
    row_step: int | None = None
    points: int | None = None  # unorganized clouds below capacity: the width a message carries

    @property
    def capacity(self) -> CloudLayout:
        return CloudLayout.create(self.fields, self.width, self.height, row_step=self.row_step)

    @property
    def layout(self) -> CloudLayout:
        """The layout of one message of this sample."""
        return self.capacity.with_points(width=self.points)


SAMPLES: dict[str, Sample] = {
    "ouster": Sample("ouster", 1024, 128),
    "velodyne": Sample("velodyne", 28_800),
    "livox": Sample("livox", 24_000),
    "xyz": Sample("xyz", 5000),
    "xyzi": Sample("xyzi", 5000),
    "xyzrgb": Sample("xyzrgb", 640, 48),
    "row_padding": Sample("xyzi", 100, 16, row_step=100 * 16 + 72),
    "velodyne_below_capacity": Sample("velodyne", 28_800, points=17_321),
    "livox_below_capacity": Sample("livox", 24_000, points=5),
    "empty": Sample("xyz", 1000, points=0),
}


def sample_bytes(layout: CloudLayout, seed: int = 0) -> np.ndarray:
    """``layout.data_size`` bytes: random values in every field (finite floats, full-range integers), noise elsewhere."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, layout.data_size, dtype=np.uint8)
    for field in layout.fields:
        view = layout.geometry(field.name).host_array(data)
        if field.name == "rgb":  # PCL packs 0x00RRGGBB into the float32's bytes
            view.view(view.dtype.str.replace("f", "u"))[...] = rng.integers(0, 1 << 24, view.shape)
        elif view.dtype.kind == "f":
            view[...] = rng.normal(0.0, 50.0, view.shape)
        else:
            info = np.iinfo(view.dtype)
            view[...] = rng.integers(info.min, info.max, view.shape, dtype=view.dtype.newbyteorder("="), endpoint=True)
    return data


def field_values(layout: CloudLayout, data: np.ndarray, name: str) -> np.ndarray:
    """Field ``name`` of a cloud held in host ``data``, as a fresh array in this machine's byte order."""
    view = layout.geometry(name).host_array(data)
    return view.astype(view.dtype.newbyteorder("="))


def cloud_msg(layout: CloudLayout, data: np.ndarray, header=None) -> PointCloud2:
    """A ``sensor_msgs/PointCloud2`` of ``layout`` carrying ``data``.

    The bytes go in as ``array.array('B')``, the type every distro's setter keeps without checking each byte
    (Humble's, and Jazzy's under ROS_PYTHON_CHECK_FIELDS=1, check anything else byte by byte).
    """
    msg = PointCloud2()
    if header is not None:
        msg.header = header
    layout.fill_message(msg)
    msg.data = array.array("B", data.tobytes())
    return msg
