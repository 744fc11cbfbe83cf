"""The PointCloud2 twin of a PointCloudPublisher and a PointCloudSubscription, in one process with real rclpy."""

import numpy as np
import pytest
from gpu_marks import MEMORIES
from sensor_msgs.msg import PointCloud2
from spinning import received, spin_until, spinning

from ros2_cuda_ipc_pointcloud import PointCloudPublisher, PointCloudSubscription

ROWS, COLS, STEP = 4, 32, 48  # Ouster points


def points(seq: int) -> np.ndarray:
    return ((np.arange(ROWS * COLS * STEP).reshape(ROWS, COLS, STEP) * 3 + seq) % 253).astype(np.uint8)


def publish(pub, seq, memory):
    data = points(seq)
    if memory == "cuda":
        import torch

        data = torch.from_numpy(data).cuda()
    assert pub.publish_array(data) is not None
    if memory == "cuda":
        torch.cuda.synchronize()


@pytest.mark.parametrize("memory", MEMORIES)
def test_no_twin_subscriber_no_download_and_the_twin_is_the_cloud(node, memory):
    got = []
    with PointCloudPublisher(node, "cloud_twins", fields="ouster", width=COLS, height=ROWS, memory=memory,
                             reuse_delay=0) as pub, \
            PointCloudSubscription(node, "cloud_twins", lambda view: (got.append(view.point_count), view.close())) \
            as sub, spinning(node) as executor:
        assert pub.twins is not None and pub.twins.topics == ("/cloud_twins/cpu",)
        assert spin_until(executor, lambda: pub.subscription_count > 0)
        publish(pub, 0, memory)
        assert spin_until(executor, lambda: got)
        assert pub.fallback_stats()["downloads"] == pub.fallback_stats()["leased"] == 0
        with received(node, PointCloud2, "cloud_twins/cpu") as twins:
            assert spin_until(executor, lambda: pub.twins.subscription_counts()["/cloud_twins/cpu"] > 0)
            publish(pub, 1, memory)
            assert spin_until(executor, lambda: twins and len(got) == 2)
        cloud = twins[0]
        assert (cloud.height, cloud.width, cloud.point_step) == (ROWS, COLS, STEP)
        assert [f.name for f in cloud.fields][:4] == ["x", "y", "z", "intensity"]
        assert bytes(cloud.data) == points(1).tobytes()
        assert pub.fallback_stats()["downloads"] == 1
        assert sub.stats()["frames"] == {"zero_copy": 2, "fallback": 0, "refused": 0}
