"""The bridge nodes: in one process with real rclpy publishers and subscriptions, and as executables that end on a signal."""

import signal
import subprocess
import sys
import time

import pytest
import rclpy
from block_reuse import BAD_REUSE_DELAYS
from cloud_samples import SAMPLES, cloud_msg, sample_bytes
from gpu_marks import MEMORIES
from rcl_interfaces.srv import ListParameters
from sensor_msgs.msg import PointCloud2
from spinning import publishing, received, spin_until, spinning

from ros2_cuda_ipc_msgs.msg import GpuPointCloud2
from ros2_cuda_ipc_pointcloud import CloudLayout, PointCloudPublisher
from ros2_cuda_ipc_pointcloud.nodes import GpuToPointCloud2, PointCloud2ToGpu


@pytest.mark.parametrize("memory", MEMORIES)
def test_both_bridges_in_a_row_give_back_the_same_bytes(node, memory):
    to_gpu = PointCloud2ToGpu(parameter_overrides=[rclpy.parameter.Parameter("memory", value=memory)])
    from_gpu = GpuToPointCloud2(cli_args=["--ros-args", "-r", "points:=points_out"])
    with received(node, PointCloud2, "points_out") as got, publishing(node, PointCloud2, "points") as lidar, \
            spinning(node, to_gpu, from_gpu) as executor:
        assert spin_until(executor, lambda: lidar.get_subscription_count() > 0 and from_gpu.listeners > 0)
        clouds = [SAMPLES["velodyne_below_capacity"].layout, SAMPLES["livox_below_capacity"].layout,
                  SAMPLES["row_padding"].layout]
        for index, layout in enumerate(clouds):
            msg = cloud_msg(layout, sample_bytes(layout, seed=index))
            lidar.publish(msg)
            assert spin_until(executor, lambda index=index: len(got) > index), f"cloud {index} did not come back"
            assert bytes(got[index].data) == bytes(msg.data) and got[index].row_step == msg.row_step
        assert to_gpu.publisher is not None and to_gpu.publisher.pool.memory == memory
        assert from_gpu.converted == 3 and to_gpu.dropped == 0


def test_pool_is_kept_for_smaller_clouds_and_remade_for_a_new_layout(node):
    to_gpu = PointCloud2ToGpu(parameter_overrides=[rclpy.parameter.Parameter("memory", value="host"),
                                                   rclpy.parameter.Parameter("reuse_delay", value=0.0)])
    with received(node, GpuPointCloud2, "gpu_points") as got, publishing(node, PointCloud2, "points") as lidar, \
            spinning(node, to_gpu) as executor:
        assert spin_until(executor, lambda: lidar.get_subscription_count() > 0)
        pools = []
        for width, fields in ((1000, "velodyne"), (10, "velodyne"), (2000, "velodyne"), (5, "livox")):
            layout = CloudLayout.create(fields, width)
            before = len(got)
            lidar.publish(cloud_msg(layout, sample_bytes(layout)))
            assert spin_until(executor, lambda before=before: len(got) > before)
            pools.append(bytes(got[-1].core.pool_id))
            assert got[-1].width == width and got[-1].point_step == layout.point_step
        assert pools[0] == pools[1] != pools[2] != pools[3]
        assert to_gpu.publisher is not None and to_gpu.publisher.pool.reuse_delay == 0


def test_gpu_to_pointcloud2_downloads_nothing_without_subscribers(node):
    bridge = GpuToPointCloud2()
    with spinning(node, bridge) as executor, \
            PointCloudPublisher(node, "gpu_points", fields="xyz", width=10, memory="host") as pub:
        assert spin_until(executor, lambda: node.count_subscribers("gpu_points") > 0)
        pub.borrow().publish()
        assert spin_until(executor, lambda: bridge.skipped == 1)
        assert bridge.converted == 0 and bridge.reader.stats()["reads"] == 0


@pytest.mark.parametrize("delay", [*BAD_REUSE_DELAYS, "soon"])
def test_pointcloud2_to_gpu_refuses_a_bad_reuse_delay_by_name(delay):
    with pytest.raises(ValueError, match="reuse_delay must be"):
        PointCloud2ToGpu(parameter_overrides=[rclpy.parameter.Parameter("reuse_delay", value=delay)])


def wait_until_answering(node, name: str, proc: subprocess.Popen, timeout: float = 60.0) -> bool:
    """Until the node ``name`` answers a parameter request: it is made and spinning (a signal that lands while rclpy
    is still creating its publishers can crash rclpy itself, which is not what these tests are about)."""
    client = node.create_client(ListParameters, f"/{name}/list_parameters")
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if client.wait_for_service(timeout_sec=0.1):
                # A request made as soon as the service shows can lose its response (the server's response writer
                # not yet matched to this client's reader, a known DDS discovery race): ask again after 2 s.
                future = client.call_async(ListParameters.Request())
                rclpy.spin_until_future_complete(node, future, timeout_sec=min(2.0, max(0.0, deadline - time.monotonic())))
                if future.done():
                    return True
                client.remove_pending_request(future)
        return False
    finally:
        node.destroy_client(client)


@pytest.mark.parametrize(("main", "name"), [("gpu_to_pointcloud2_main", "gpu_to_pointcloud2"),
                                            ("pointcloud2_to_gpu_main", "pointcloud2_to_gpu")])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_executables_end_on_a_signal_with_exit_0_and_no_traceback(node, main, name, signum):
    code = f"from ros2_cuda_ipc_pointcloud.nodes import {main}; {main}()"
    name = f"{name}_{int(signum)}"  # a name of its own: the graph may still list the previous case's node for a while
    proc = subprocess.Popen([sys.executable, "-c", code, "--ros-args", "-r", f"__node:={name}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until_answering(node, name, proc), f"{name} never answered"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
