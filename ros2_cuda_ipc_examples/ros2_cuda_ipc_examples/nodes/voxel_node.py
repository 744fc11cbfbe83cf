"""``VoxelDownsample``: each LiDAR scan to the centroids of its occupied voxels, on the GPU where it lies.

    ros2 run ros2_cuda_ipc_examples voxel_downsample --ros-args -p voxel:=0.25

``wait_for_subscribers:=N`` (default 0) subscribes to ``points`` only once N nodes read ``downsampled``;
``block_count`` (4) and ``reuse_delay`` (0.01 s before a published block is reused) configure its pool.

Reads ``points`` (``GpuPointCloud2``, through a ``PointCloudSubscription``: zero-copy, or the LiDAR's
PointCloud2 twin where its pool cannot be mapped) as a tensor of the publisher's own memory
(``torch.from_dlpack(view.xyz)``), checks the scan against its number, averages the points of every
occupied ``voxel``-metre cell (torch; numpy on host memory without torch) and publishes the centroids
as an unorganized ``xyzi`` cloud on ``downsampled``, the intensity of each the scan number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from std_msgs.msg import Header

from ros2_cuda_ipc_core import NodeParameter, positive
from ros2_cuda_ipc_pointcloud import (
    PointCloudPublisher,
    PointCloudReader,
    PointCloudSubscription,
    numpy_voxel_downsample,
    voxel_downsample,
)
from ros2_cuda_ipc_tools import run_component

from .arrays import ArrayBackend
from .lidar_scene import LidarProbe
from .pipeline_node import PipelineNode

__all__ = ["VoxelDownsample", "main"]


class VoxelDownsample(PipelineNode):
    """``points`` -> voxel centroids on ``downsampled``."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("voxel", 0.25, "voxel edge in metres"),
        NodeParameter("wait_for_subscribers", 0, "subscribe to the input once this many read the output"),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("voxel_downsample", **kwargs)
        self.clouds: PointCloudPublisher | None = None
        self.voxel = positive("voxel", self.parameter("voxel"))
        self.block_count, self.reuse_delay = self.pool_parameters()
        self.reader = PointCloudReader(node=self, topic="points")
        self.busy = 0
        self._probes: dict[tuple[int, int], LidarProbe] = {}
        arrays = self.prepare_gpu()
        if arrays is not None and arrays.name == "torch":  # torch's unique and index_add kernels load on first use
            with arrays.activate():
                voxel_downsample(arrays.upload(np.zeros((8, 3), dtype=np.float32)), self.voxel)
            arrays.synchronize()
        # Subscribe to the LiDAR only once this many read our output (wait_for_subscribers, default 0).
        self.subscribe_when_read("downsampled", self.parameter("wait_for_subscribers"),
                                 lambda: self.subscribe_frames(PointCloudSubscription, "points", self._work,
                                                               reader=self.reader))

    def _work(self, view: Any, arrays: ArrayBackend) -> None:
        header = view.header
        xyz = arrays.wrap(view.xyz)
        intensity = arrays.wrap(view.field("intensity")).reshape(-1)
        key = (view.height, view.width)
        if key not in self._probes:
            self._probes[key] = LidarProbe.for_scan(*key)
        probe = self._probes[key]
        index = arrays.upload(probe.rings_index * view.width + probe.columns_index)
        if arrays.name == "torch":
            centroids, _ = voxel_downsample(xyz, self.voxel)
        else:  # numpy on host memory (and a host copy for cupy, which the example does not voxelize itself)
            centroids = arrays.upload(numpy_voxel_downsample(np.asarray(arrays.download(xyz)), self.voxel)[0])
        sampled = np.concatenate([arrays.download(xyz[index]), arrays.download(intensity[index])[:, None]], axis=1)
        seq, good = probe.check(sampled)
        self.frame_seen(seq)
        self.counts["checked" if good else "bad"] += 1
        if good:
            self._publish(centroids, seq, header, arrays, capacity=view.point_count)
        self.latency_from(header.stamp)

    def _publish(self, centroids: Any, seq: int, header: Header, arrays: ArrayBackend, capacity: int) -> None:
        memory = "cuda" if arrays.on_gpu else "host"
        if self.clouds is None or self.clouds.pool.memory != memory or self.clouds.layout.width < capacity:
            if self.clouds is not None:
                self.clouds.close()
            self.clouds = PointCloudPublisher(self, "downsampled", fields="xyzi", width=capacity,
                                              block_count=self.block_count, memory=memory,  # type: ignore[arg-type]
                                              reuse_delay=self.reuse_delay)
        frame = self.clouds.borrow()
        if frame is None:
            self.busy += 1  # the preview still holds every block: this scan is not passed on
            return
        count = len(centroids)
        with frame:
            arrays.wrap(frame.xyz)[:count] = centroids
            arrays.wrap(frame.field("intensity"))[:count] = float(seq)
            frame.publish(arrays.stream, header, width=count, is_dense=True)
        self.counts["out"] += 1

    def extra_stats(self) -> dict[str, Any]:
        stats = self.reader.stats()
        return {"reads": stats["reads"], "same_process_reads": stats["same_process_reads"],
                "leases_held": stats["leases_held"], "acquire_misses": self.busy}

    def destroy_node(self) -> None:
        if getattr(self, "clouds", None) is not None:
            self.clouds.close()  # type: ignore[union-attr]
            self.clouds = None
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(VoxelDownsample, argv))


if __name__ == "__main__":
    main()
