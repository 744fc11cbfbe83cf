"""Test 4: CUDA point clouds seen by torch and cupy field by field, in the publisher's memory.  Skips without a GPU."""

import re
import subprocess
import sys

import numpy as np
import pytest
from cloud_samples import SAMPLES, cloud_msg, field_values, sample_bytes
from gpu_marks import needs_gpu

from ros2_cuda_ipc_pointcloud import (
    PointCloudPublisher,
    PointCloudReader,
    numpy_voxel_downsample,
    publish_pointcloud2_msg,
    to_pointcloud2_msg,
    voxel_downsample,
)

pytestmark = needs_gpu


def publish_sample(pub, name, seed=0):
    """Upload a whole sample cloud (padding included) into a borrowed CUDA frame and publish it."""
    import torch

    layout = SAMPLES[name].layout
    data = sample_bytes(layout, seed)
    frame = pub.borrow()
    torch.from_dlpack(frame.data)[: len(data)].copy_(torch.from_numpy(data).cuda())
    return frame.publish(torch.cuda.current_stream(), width=layout.width, height=layout.height), layout, data


def test_torch_field_views_are_the_mapping_with_its_strides(node):
    import cupy
    import torch

    with PointCloudPublisher(node, "pc_cuda_ouster", fields="ouster", width=1024, height=128, memory="cuda") as pub:
        msg, layout, data = publish_sample(pub, "ouster", seed=1)
        stream = torch.cuda.Stream()
        with PointCloudReader().read(msg, stream) as view, torch.cuda.stream(stream):
            intensity = torch.from_dlpack(view.field("intensity"))
            assert tuple(intensity.shape) == (128, 1024) and intensity.dtype == torch.float32
            assert intensity.stride() == (1024 * 48 // 4, 48 // 4)
            assert intensity.data_ptr() == view.handle.device_ptr + 16
            for name in layout.field_names:  # cupy: every dtype, uint16 included
                seen = cupy.asnumpy(cupy.from_dlpack(view.field(name)))
                np.testing.assert_array_equal(seen, field_values(layout, data, name))
            xyz = torch.from_dlpack(view.xyz)
            assert tuple(xyz.shape) == (128 * 1024, 3) and xyz.stride() == (12, 1)
            assert xyz.data_ptr() == view.handle.device_ptr
            np.testing.assert_array_equal(xyz[:, 1].cpu().numpy(), field_values(layout, data, "y").reshape(-1))
            with pytest.raises(TypeError, match="no host structured array"):
                view.structured  # noqa: B018
            del intensity, xyz


def test_velodyne_time_refuses_dlpack_by_name_and_reads_through_cai_and_copy_field(node):
    import cupy
    import torch

    with PointCloudPublisher(node, "pc_cuda_velodyne", fields="velodyne", width=28_800, memory="cuda") as pub:
        msg, layout, data = publish_sample(pub, "velodyne_below_capacity", seed=2)
        with PointCloudReader().read(msg) as view:
            want = field_values(layout, data, "time")
            with pytest.raises(BufferError, match=re.escape("field 'time' cannot be a DLPack view")):
                torch.from_dlpack(view.field("time"))
            through_cai = cupy.asarray(view.field("time"))  # no copy: the CAI's pointer and byte strides
            assert through_cai.strides == (22,) and through_cai.data.ptr == view.handle.device_ptr + 18
            assert through_cai.dtype == cupy.float32 and through_cai.shape == (layout.width,)
            # GPUs fault on misaligned 4-byte loads, so read the same memory bytewise (cupy kernels on uint8)
            as_bytes = cupy.ndarray((layout.width, 4), cupy.uint8, through_cai.data, strides=(22, 1))
            np.testing.assert_array_equal(cupy.asnumpy(as_bytes).view(np.float32).reshape(-1), want)
            on_gpu = torch.empty(layout.width, dtype=torch.float32, device="cuda")
            view.copy_field("time", on_gpu)
            np.testing.assert_array_equal(on_gpu.cpu().numpy(), want)
            on_host = np.empty(layout.width, np.float32)
            view.copy_field("time", on_host)
            np.testing.assert_array_equal(on_host, want)
            ring = cupy.from_dlpack(view.field("ring"))  # 2-byte ring at 16, 22 apart: whole elements
            assert ring.strides == (22,)
            np.testing.assert_array_equal(cupy.asnumpy(ring), field_values(layout, data, "ring"))
            del through_cai, as_bytes, ring


@pytest.mark.parametrize("name", ["ouster", "velodyne_below_capacity", "livox", "row_padding"])
def test_bridge_round_trip_through_gpu_memory_is_byte_identical(node, name):
    sample = SAMPLES[name]
    layout = sample.layout
    data = sample_bytes(layout, seed=3)
    msg = cloud_msg(layout, data)
    with PointCloudPublisher(node, f"pc_cuda_bridge_{name}", fields=sample.fields, width=sample.width,
                             height=sample.height, row_step=sample.row_step, memory="cuda") as pub:
        sent = publish_pointcloud2_msg(pub, msg)
        with PointCloudReader().read(sent) as view:
            assert view.memory == "cuda"
            back = to_pointcloud2_msg(view)
    assert bytes(back.data) == bytes(msg.data) and back.row_step == msg.row_step


def test_publish_array_of_a_torch_tensor(node):
    import torch

    points = torch.rand((5000, 4), device="cuda")
    with PointCloudPublisher(node, "pc_cuda_array", fields="xyzi", width=10_000, memory="cuda") as pub:
        msg = pub.publish_array(points[::2], stream=torch.cuda.current_stream())
        with PointCloudReader().read(msg) as view:
            assert view.width == 2500
            assert torch.equal(torch.from_dlpack(view.field("intensity")), points[::2, 3])
            assert torch.equal(torch.from_dlpack(view.xyz), points[::2, :3])


def test_voxel_example_downsamples_a_million_points_in_another_process():
    run = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_pointcloud.voxel_example", "--points", "1000000",
                          "--clouds", "10", "--memory", "cuda"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "zero copy: True, matches numpy: True" in run.stdout, run.stdout
    print(run.stdout)


def test_torch_voxel_downsample_matches_numpy_on_the_gpu():
    import torch

    xyz = np.random.default_rng(1).uniform(-20, 20, (200_000, 3)).astype(np.float32)
    centroids, counts = voxel_downsample(torch.from_numpy(xyz).cuda(), 0.5)
    want, want_counts = numpy_voxel_downsample(xyz, 0.5)
    assert centroids.is_cuda and np.array_equal(counts.cpu().numpy(), want_counts)
    np.testing.assert_allclose(centroids.cpu().numpy(), want, atol=1e-4)
