"""``CloudPreview``: the one node of the LiDAR branch that copies clouds to the CPU: rviz, rosbag, a PNG.

    ros2 run ros2_cuda_ipc_examples cloud_preview --ros-args -p rate:=2.0 -p snapshot_path:=/tmp/lidar.png

Checks every cloud on ``downsampled`` (every point's intensity is the scan number, every point inside
the room); at most ``rate`` times a second downloads one, publishes it as ``sensor_msgs/PointCloud2``
on ``preview`` and, every ``snapshot_period`` seconds, draws it seen from above (24 m across, height
as brightness) into the PNG at ``snapshot_path`` (none when empty).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from sensor_msgs.msg import PointCloud2

from ros2_cuda_ipc_core import NodeParameter, not_negative, positive
from ros2_cuda_ipc_msgs.msg import BufferCore, GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudReader, to_pointcloud2_msg
from ros2_cuda_ipc_tools import run_component

from .arrays import ArrayBackend
from .lidar_scene import RANGE_LIMITS
from .pipeline_node import PipelineNode
from .png import write_png

__all__ = ["CloudPreview", "birds_eye", "main"]

_SIDE_METRES, _SIDE_PIXELS = 24.0, 480


def birds_eye(xyz: np.ndarray) -> np.ndarray:
    """(480, 480, 3) uint8: the points seen from above, x to the right, y up, brighter when higher."""
    image = np.zeros((_SIDE_PIXELS, _SIDE_PIXELS, 3), dtype=np.uint8)
    scale = _SIDE_PIXELS / _SIDE_METRES
    cols = ((xyz[:, 0] + _SIDE_METRES / 2) * scale).astype(np.int64)
    rows = ((_SIDE_METRES / 2 - xyz[:, 1]) * scale).astype(np.int64)
    inside = (cols >= 0) & (cols < _SIDE_PIXELS) & (rows >= 0) & (rows < _SIDE_PIXELS)
    height = np.clip((xyz[inside, 2] + 3.0) / 6.0, 0.0, 1.0)
    image[rows[inside], cols[inside]] = np.stack([80 + 175 * height, 255 - 120 * height, 255 * (1 - height)],
                                                 axis=1).astype(np.uint8)
    image[_SIDE_PIXELS // 2 - 1: _SIDE_PIXELS // 2 + 2, _SIDE_PIXELS // 2 - 1: _SIDE_PIXELS // 2 + 2] = 255  # sensor
    return image


class CloudPreview(PipelineNode):
    """Checks every cloud from ``downsampled``; downloads a few to ``preview`` and ``snapshot_path``."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("rate", 2.0, "downloads a second at most"),
        NodeParameter("snapshot_path", "", "PNG written every snapshot_period seconds (empty: none)"),
        NodeParameter("snapshot_period", 1.0, "seconds between two snapshots"),
        NodeParameter("margin", 0.5, "metres a voxel centroid may sit off the wall it was drawn on"),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("cloud_preview", **kwargs)
        self.rate = positive("rate", self.parameter("rate"))
        self.snapshot_path = self.parameter("snapshot_path")
        self.snapshot_period = positive("snapshot_period", self.parameter("snapshot_period"))
        # metres: a voxel centroid sits at most this far off the wall
        self.margin = not_negative("margin", self.parameter("margin"))
        self.reader = PointCloudReader(node=self, topic="downsampled")
        self._out = self.create_publisher(PointCloud2, "preview", 2)
        self._last_download = self._last_snapshot = -float("inf")
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cloud_png")
        self._snapshot: Future[None] | None = None
        self.downloads = 0
        self.prepare_gpu()
        self.subscribe(GpuPointCloud2, "downsampled", self._on_cloud, 10)

    def _on_cloud(self, msg: GpuPointCloud2) -> None:
        memory = "cuda" if msg.core.memory == BufferCore.MEMORY_CUDA else "host"
        self.read_frame(self.reader, msg, memory, lambda view, arrays: self._work(view, arrays, msg))

    def _work(self, view: Any, arrays: ArrayBackend, msg: GpuPointCloud2) -> None:
        if view.point_count == 0:
            self.counts["bad"] += 1  # the scene always leaves points: an empty cloud is wrong
            return
        xyz = arrays.wrap(view.xyz)
        intensity = arrays.download(arrays.wrap(view.field("intensity")))
        reach = arrays.download(xyz[:, 0] * xyz[:, 0] + xyz[:, 1] * xyz[:, 1]) ** 0.5
        seq = int(intensity[0])
        low, high = RANGE_LIMITS
        good = bool(np.all(intensity == seq) and reach.min() >= low - self.margin and reach.max() <= high + self.margin)
        self.frame_seen(seq)
        self.counts["checked" if good else "bad"] += 1
        now = time.monotonic()
        if good and now - self._last_download >= 1.0 / self.rate:
            self._last_download = now
            self._out.publish(to_pointcloud2_msg(view))  # the one download
            self.downloads += 1
            self.counts["out"] += 1
            writing = self._snapshot is not None and not self._snapshot.done()
            if self.snapshot_path and now - self._last_snapshot >= self.snapshot_period and not writing:
                self._last_snapshot = now
                self._snapshot = self._writer.submit(lambda points: write_png(self.snapshot_path, birds_eye(points)),
                                                     np.array(arrays.download(xyz)))
        self.latency_from(msg.header.stamp)

    def extra_stats(self) -> dict[str, Any]:
        stats = self.reader.stats()
        return {"reads": stats["reads"], "same_process_reads": stats["same_process_reads"],
                "leases_held": stats["leases_held"], "downloads": self.downloads, "snapshot_path": self.snapshot_path}

    def destroy_node(self) -> None:
        writer = getattr(self, "_writer", None)  # None when the parameters were refused
        if writer is not None:
            writer.shutdown(wait=True)
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(CloudPreview, argv))


if __name__ == "__main__":
    main()
