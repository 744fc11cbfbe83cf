"""Forged point clouds sent over DDS to the real bridge processes: each is refused, counted and logged, no pool
or message is sized by one, and the bridge is still alive and converting good clouds afterwards."""

import copy

import numpy as np
import pytest
from bridge_process import last_count, node_process, publish_filled, spin_for, spin_until
from gpu_marks import MEMORIES
from sensor_msgs.msg import PointCloud2, PointField
from spinning import publishing, received

from ros2_cuda_ipc_msgs.msg import GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudPublisher

PACKAGE = "ros2_cuda_ipc_pointcloud"
XYZ = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")]


def cloud(height: int, width: int, point_step: int, row_step: int, data: bytes, fields=XYZ) -> PointCloud2:
    msg = PointCloud2(height=height, width=width, point_step=point_step, row_step=row_step, fields=fields)
    msg.data = data
    return msg


FORGED_CLOUDS = [
    cloud(1, 1, 12, 2**32 - 1, b"\0" * 12),  # was a 4 x 4 GiB pool
    cloud(2**32 - 1, 0, 12, 2**32 - 1, b""),
    cloud(4, 4, 12, 48, b"\0" * 100),  # fewer bytes than its rows
    cloud(1, 4, 12, 8, b"\0" * 48),  # a row shorter than its points
    cloud(1, 4, 12, 48, b"\0" * 48, fields=[PointField(name="x", offset=10, datatype=PointField.FLOAT32, count=1)]),
    cloud(1, 4, 12, 48, b"\0" * 48, fields=[PointField(name="x", offset=0, datatype=99, count=1)]),
    cloud(1, 100_000, 12, 1_200_000, b"\0" * 1_200_000),  # all it claims, but beyond max_frame_bytes (1 MB here)
]


@pytest.mark.parametrize("memory", MEMORIES)
def test_pointcloud2_to_gpu_survives_forged_clouds_and_still_converts(node, memory):
    good = cloud(1, 4, 12, 48, np.arange(12, dtype=np.float32).tobytes())
    with node_process(PACKAGE, "pointcloud2_to_gpu", node, "points",
                      [f"memory:={memory}", "max_frame_bytes:=1000000", "stats_period:=0.5"]) as bridge, \
            publishing(node, PointCloud2, "points") as lidar, received(node, GpuPointCloud2, "gpu_points") as got:
        assert spin_until(node, lambda: got or (lidar.publish(good) and False) or not bridge.alive, 60)
        for forged in FORGED_CLOUDS:
            lidar.publish(forged)
            spin_for(node, 0.05)
        got.clear()
        assert spin_until(node, lambda: got or (lidar.publish(good) and False) or not bridge.alive, 60)
        assert bridge.alive and (got[0].height, got[0].width, got[0].row_step) == (1, 4, 48)
        spin_for(node, 1.0)
        assert bridge.stop() == 0
    assert last_count(bridge.log, "refused") == len(FORGED_CLOUDS)
    assert bridge.log.count("publishing clouds from") == 1  # no forged cloud made a pool
    assert f"from a {memory} pool" in bridge.log
    assert "cloud dropped" in bridge.log and "Traceback" not in bridge.log


@pytest.mark.parametrize("memory", MEMORIES)
def test_gpu_to_pointcloud2_survives_forged_clouds_and_still_converts(node, memory):
    with PointCloudPublisher(node, "gpu_points", fields="xyz", width=4, memory=memory) as lidar, \
            publishing(node, GpuPointCloud2, "gpu_points") as forger, received(node, PointCloud2, "points") as got, \
            node_process(PACKAGE, "gpu_to_pointcloud2", node, "gpu_points",
                         ["max_frame_bytes:=1000000", "stats_period:=0.5"]) as bridge:


        assert spin_until(node, lambda: got or publish_filled(lidar, 2.0, "xyz") or not bridge.alive, 60)
        assert spin_until(node, lambda: forger.get_subscription_count() > 0, 60)
        live = lidar.borrow(timeout=1.0).publish()  # a live core for the forged ones to borrow
        forged_messages = []
        for height, width, row_step in [(2**32 - 1, 0, 2**32 - 1),  # was OverflowError: the node died
                                        (1, 0, 2**28),  # was a 256 MiB PointCloud2 for an empty cloud
                                        (1, 4, 2**32 - 1), (3, 4, 48)]:
            forged = copy.copy(live)
            forged.height, forged.width, forged.row_step = height, width, row_step
            forged_messages.append(forged)
        for forged in forged_messages:
            forger.publish(forged)
            spin_for(node, 0.05)
        got.clear()
        assert spin_until(node, lambda: got or publish_filled(lidar, 2.0, "xyz") or not bridge.alive, 60)
        assert bridge.alive and all(np.frombuffer(bytes(c.data), np.float32)[0] == 2.0 for c in got)
        spin_for(node, 1.0)
        assert bridge.stop() == 0
    assert last_count(bridge.log, "refused") == len(forged_messages)
    assert "cloud dropped" in bridge.log and "Traceback" not in bridge.log
