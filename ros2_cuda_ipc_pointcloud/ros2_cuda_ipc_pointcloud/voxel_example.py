"""Example: GPU voxel-grid downsampling of 1 M-point clouds in another process, with torch, no copy in between.

    ros2 run ros2_cuda_ipc_pointcloud voxel_downsample_example [--points 1000000] [--voxel 0.2] [--clouds 20]

This process publishes ``xyzi`` clouds written in place on the GPU; a second process (started here)
reads each one as a torch tensor of the publisher's own memory (``torch.from_dlpack(view.xyz)``),
averages the points of every occupied voxel, publishes the centroids as an ``xyz`` cloud (one
device-to-device copy), and checks its first result against numpy.  Needs torch with either memory:
``--memory host`` runs the same with torch on the CPU (no GPU needed, torch still is).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import Ros2CudaIpcError, run_tool, tool_parser

from .voxel import numpy_voxel_downsample, voxel_downsample

TOPIC, OUT_TOPIC = "voxel_example/points", "voxel_example/downsampled"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise SystemExit("voxel_downsample_example needs PyTorch (pip install torch); it is an optional consumer") from None
    return torch


def scene(points: int, seed: int = 0) -> np.ndarray:
    """(points, 4) float32 x, y, z, intensity: a ground plane, a few boxes and scattered returns, 50 m across."""
    rng = np.random.default_rng(seed)
    ground = points * 6 // 10
    boxes = points * 35 // 100
    cloud = np.empty((points, 4), np.float32)
    cloud[:ground, :2] = rng.uniform(-25, 25, (ground, 2))
    cloud[:ground, 2] = rng.normal(0.0, 0.02, ground)
    centres = rng.uniform(-20, 20, (20, 3)) * np.array([1, 1, 0]) + np.array([0, 0, 1.0])
    which = rng.integers(0, 20, boxes)
    cloud[ground:ground + boxes, :3] = centres[which] + rng.uniform(-1.0, 1.0, (boxes, 3))
    cloud[ground + boxes:, :3] = rng.uniform(-25, 25, (points - ground - boxes, 3)) * np.array([1, 1, 0.2])
    cloud[:, 3] = rng.uniform(0, 255, points)
    return cloud


def downsampler(args: argparse.Namespace) -> None:
    """The second process: read, downsample on the GPU, publish the centroids; one JSON line at the end."""
    import rclpy

    from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

    from .publisher import PointCloudPublisher
    from .reader import PointCloudReader

    torch = _torch()
    rclpy.init()
    node = rclpy.create_node("voxel_downsampler")
    reader = PointCloudReader()
    out = PointCloudPublisher(node, OUT_TOPIC, fields="xyz", width=args.points, memory=args.memory)
    cuda = out.pool.memory == "cuda"
    stream = torch.cuda.Stream() if cuda else None
    last = [time.monotonic()]
    result: dict[str, Any] = {"clouds": 0, "points": 0, "voxels": [], "ms": [], "checked": None, "zero_copy": None,
                              "dropped": 0}
    first: list[np.ndarray] = []  # the first cloud's points and voxels, checked against numpy at the end

    def on_cloud(msg: GpuPointCloud2) -> None:
        started = time.perf_counter()
        try:
            view = reader.read(msg, stream)
        except Ros2CudaIpcError:  # the publisher reused the block first (we were slow): drop it
            result["dropped"] += 1
            return
        with view:
            xyz = torch.from_dlpack(view.xyz)
            result["zero_copy"] = xyz.data_ptr() == view.handle.device_ptr + view.layout.field("x").offset
            with torch.cuda.stream(stream) if cuda else contextlib.nullcontext():
                centroids, counts = voxel_downsample(xyz, args.voxel)
                out.publish_array(centroids, stream=stream)
                if stream is not None:
                    stream.synchronize()
            if not first:
                host = np.empty((view.point_count, 3), np.float32)
                for axis, name in enumerate("xyz"):
                    column = np.empty(view.point_count, np.float32)
                    view.copy_field(name, column)
                    host[:, axis] = column
                first.extend((host, centroids.cpu().numpy(), counts.cpu().numpy()))
            del xyz
        result["ms"].append((time.perf_counter() - started) * 1e3)
        result["voxels"].append(len(counts))
        result["clouds"] += 1
        result["points"] = view.point_count
        last[0] = time.monotonic()

    node.create_subscription(GpuPointCloud2, TOPIC, on_cloud, 10)
    print("ready", flush=True)
    deadline = time.monotonic() + args.timeout
    while result["clouds"] < args.clouds and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        if result["clouds"] and time.monotonic() - last[0] > 3.0:  # the publisher is done (one sent before we matched is lost)
            break
    result["memory"] = out.pool.memory
    if first:  # both sort voxels by their (x, y, z) cell: compare them one to one
        host, got, got_counts = first
        want, want_counts = numpy_voxel_downsample(host, args.voxel)
        result["checked"] = bool(np.array_equal(got_counts, want_counts) and np.allclose(got, want, atol=1e-4))
    print(json.dumps(result), flush=True)
    out.close()
    node.destroy_node()
    rclpy.try_shutdown()


def publish_clouds(args: argparse.Namespace) -> str:
    """This process: publish ``args.clouds`` clouds at 10 Hz, each the scene moved a little, written in place."""
    import rclpy

    from .publisher import PointCloudPublisher

    rclpy.init()
    node = rclpy.create_node("voxel_example_lidar")
    pub = PointCloudPublisher(node, TOPIC, fields="xyzi", width=args.points, memory=args.memory)
    base = scene(args.points)
    torch: Any = _torch() if pub.pool.memory == "cuda" else None
    on_gpu: Any = torch.from_numpy(base).cuda() if torch is not None else None
    deadline = time.monotonic() + 60
    while node.count_subscribers(TOPIC) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    for index in range(args.clouds):
        frame = pub.borrow(timeout=1.0)
        if frame is None:
            continue
        shift = np.float32(0.05 * index)
        with frame:
            if on_gpu is not None:
                torch.from_dlpack(frame.xyz).copy_(on_gpu[:, :3] + torch.tensor([shift, 0, 0], device="cuda"))
                torch.from_dlpack(frame.field("intensity")).copy_(on_gpu[:, 3])
                frame.publish(torch.cuda.current_stream())
            else:
                np.add(base[:, :3], [shift, 0, 0], out=np.asarray(frame.xyz))
                np.asarray(frame.field("intensity"))[...] = base[:, 3]
                frame.publish()
        time.sleep(0.1)
    memory = pub.pool.memory
    time.sleep(0.5)
    pub.close()
    node.destroy_node()
    rclpy.try_shutdown()
    return memory


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__name__, __doc__)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--voxel", type=float, default=0.2, help="voxel edge in metres")
    parser.add_argument("--clouds", type=int, default=20)
    parser.add_argument("--memory", choices=["auto", "cuda", "host"], default="auto")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--role", choices=["lidar", "downsampler"], default="lidar", help="internal: which process")
    args = parser.parse_args(argv)
    if args.points <= 0 or args.clouds <= 0 or args.voxel <= 0:
        parser.error("--points, --clouds and --voxel must be positive")
    raise SystemExit(run_tool(lambda: _run(args, argv if argv is not None else sys.argv[1:])))


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    _torch()
    try:
        if args.role == "downsampler":
            downsampler(args)
            return 0
        return _orchestrate(args, argv)
    except Ros2CudaIpcError as exc:  # no GPU for --memory cuda, say
        print(f"voxel_downsample_example ({args.role}): {exc}", file=sys.stderr)
        return 1


def _orchestrate(args: argparse.Namespace, argv: list[str]) -> int:
    child = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_pointcloud.voxel_example", *argv, "--role",
                              "downsampler"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            print("the downsampler process did not start", file=sys.stderr)
            return 1
        memory = publish_clouds(args)
        out, _ = child.communicate(timeout=args.timeout)
    finally:
        child.kill()
    summary = json.loads(out.strip().splitlines()[-1])
    ms = sorted(summary["ms"][1:] or summary["ms"])
    print(f"voxel example: {summary['clouds']}/{args.clouds} clouds of {summary['points']} points ({memory} memory; "
          f"{summary['dropped']} dropped as stale) "
          f"downsampled in another process to {summary['voxels'][-1] if summary['voxels'] else 0} voxels of "
          f"{args.voxel} m; median {ms[len(ms) // 2] if ms else float('nan'):.2f} ms a cloud (read, downsample, "
          f"publish), zero copy: {summary['zero_copy']}, matches numpy: {summary['checked']}")
    return 0 if summary["checked"] and summary["zero_copy"] and summary["clouds"] else 1


if __name__ == "__main__":
    main()
