"""``SyntheticLidar``: spinning-LiDAR scans written in place into borrowed point-cloud blocks, zero copy.

    ros2 run ros2_cuda_ipc_examples synthetic_lidar --ros-args -p rings:=128 -p columns:=2048 -p fps:=10.0

Organized ``xyzi`` clouds (rings x columns points of 16 bytes) of a round room whose wall moves
(see :mod:`~ros2_cuda_ipc_examples.lidar_scene`), on ``points`` (``GpuPointCloud2``): drawn by torch
(or cupy) on the GPU for CUDA memory, by numpy for host memory. The intensity of every point is the
scan number. Takes ``fps`` (10.0), ``frames``, ``seconds``, ``wait_for_subscribers`` and ``start_delay``
like the camera, and ``memory`` (auto), ``block_count`` (4), ``frame_id`` (lidar).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from std_msgs.msg import Header

from ros2_cuda_ipc_pointcloud import PointCloudPublisher

from .arrays import choose_memory
from .lidar_scene import LidarScene
from .pipeline_node import ParameterError
from .run_component import run_component
from .source_node import SourceNode

__all__ = ["SyntheticLidar", "main"]


class SyntheticLidar(SourceNode):
    """Publishes scan after scan of :class:`~ros2_cuda_ipc_examples.lidar_scene.LidarScene` on ``points``."""

    output_topic = "points"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("synthetic_lidar", default_fps=10.0, **kwargs)
        self.clouds: PointCloudPublisher | None = None  # destroy_node may run on a node whose parameters were refused
        rings = self.parameter("rings", 64)
        columns = self.parameter("columns", 1024)
        memory = self.parameter("memory", "auto")
        block_count = self.parameter("block_count", 4)
        self.frame_id = self.parameter("frame_id", "lidar")
        if block_count < 2:
            raise ParameterError(f"block_count must be at least 2, not {block_count}")
        self.memory, why = choose_memory(memory)
        self.get_logger().info(f"{rings} x {columns} xyzi points at {self.fps:g} Hz on {self.memory} memory ({why})")
        self.arrays = self.backend(self.memory)
        if self.arrays is None:
            raise ParameterError(f"no array library for {self.memory} memory")
        try:
            self.scene = LidarScene(rings, columns, self.arrays)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        self.clouds = PointCloudPublisher(self, "points", fields="xyzi", width=columns, height=rings,
                                          block_count=block_count, memory=self.memory)  # type: ignore[arg-type]
        self.busy = 0
        self.start_timer()

    def emit(self) -> bool:
        assert self.clouds is not None and self.arrays is not None
        frame = self.clouds.borrow()
        if frame is None:
            self.busy += 1  # every block is still being read: skip this tick
            return False
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.frame_id)
        with frame, self.arrays.activate():
            points = self.arrays.reinterpret(self.arrays.wrap(frame.data), np.float32,
                                             (self.scene.rings, self.scene.columns, 4))
            self.scene.render(points, self.seq)
            frame.publish(self.arrays.stream, header, is_dense=True)
        return True

    def extra_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {**super().extra_stats(), "memory": self.memory, "acquire_misses": self.busy}
        if self.clouds is not None:
            stats["leases_held"] = self.clouds.pool.stats()["blocks_held_by_readers"]
        return stats

    def destroy_node(self) -> None:
        if getattr(self, "clouds", None) is not None:  # None or unset when the parameters were refused
            self.clouds.close()  # type: ignore[union-attr]
            self.clouds = None
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(SyntheticLidar, argv))


if __name__ == "__main__":
    main()
