"""``SyntheticLidar``: spinning-LiDAR scans written in place into borrowed point-cloud blocks, zero copy.

    ros2 run ros2_cuda_ipc_examples synthetic_lidar --ros-args -p rings:=128 -p columns:=2048 -p fps:=10.0

Organized ``xyzi`` clouds (rings x columns points of 16 bytes) of a round room whose wall moves
(see :mod:`~ros2_cuda_ipc_examples.nodes.lidar_scene`), on ``points`` (``GpuPointCloud2``): drawn by torch
(or cupy) on the GPU for CUDA memory, by numpy for host memory. The intensity of every point is the
scan number. Takes ``fps`` (10.0), ``frames``, ``seconds``, ``wait_for_subscribers``, ``start_delay``,
``memory`` (auto), ``block_count`` (4), ``reuse_delay`` (0.01 s) and ``frame_id`` (lidar) like the camera.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ros2_cuda_ipc_core import NodeParameter
from ros2_cuda_ipc_pointcloud import PointCloudPublisher
from ros2_cuda_ipc_tools import run_component

from .lidar_scene import LidarScene
from .pipeline_node import ParameterError
from .source_node import SourceNode

__all__ = ["SyntheticLidar", "main"]


class SyntheticLidar(SourceNode):
    """Publishes scan after scan of :class:`~ros2_cuda_ipc_examples.nodes.lidar_scene.LidarScene` on ``points``."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("fps", 10.0, "scans a second"),
        NodeParameter("frame_id", "lidar", "frame_id of every header"),
        NodeParameter("rings", 64, "rings (rows) of a scan"),
        NodeParameter("columns", 1024, "columns of a scan"),
    )

    output_topic = "points"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("synthetic_lidar", **kwargs)
        rings = self.parameter("rings")
        columns = self.parameter("columns")
        try:
            self.scene = LidarScene(rings, columns, self.arrays)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        self.get_logger().info(f"{rings} x {columns} xyzi points at {self.fps:g} Hz on {self.memory} memory "
                               f"({self.memory_reason})")
        self.output = PointCloudPublisher(self, "points", fields="xyzi", width=columns, height=rings,
                                          block_count=self.block_count, memory=self.memory,  # type: ignore[arg-type]
                                          reuse_delay=self.reuse_delay)
        self.start_timer()

    def emit(self) -> bool:
        frame = self.output.borrow()
        if frame is None:
            self.busy += 1  # every block is still being read: skip this tick
            return False
        header = self.header()
        with frame, self.arrays.activate():
            points = self.arrays.reinterpret(self.arrays.wrap(frame.data), np.float32,
                                             (self.scene.rings, self.scene.columns, 4))
            self.scene.render(points, self.seq)
            frame.publish(self.arrays.stream, header, is_dense=True)
        return True


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(SyntheticLidar, argv))


if __name__ == "__main__":
    main()
