"""The viewer on CUDA frames (GPU machine, headless EGL on the NVIDIA driver): CUDA-OpenGL interop, no host copy.

A publisher process sends CUDA-memory frames; the viewer runs in this process, so the test can see
its path, count every copy its stagings make by where the destination lies, and read back what it drew.
``VIEWER_SNAPSHOT_DIR`` (or ``OUT``), when set, receives the snapshot of a camera image and an Ouster
cloud for the docs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from gl_marks import needs_egl
from gpu_marks import needs_gpu
from machine_state import machine_state
from viewer_peer import CLOUD_POINTS, ViewerPeer, image_pattern

pytestmark = [needs_gpu, needs_egl]


class CopyCounter:
    """Wraps the stagings' ``copy_strided``: counts copies into device memory and into host memory."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ros2_cuda_ipc_tools.viewer import staging

        self.to_device = self.to_host = 0
        original = staging.copy_strided

        def counted(dst: int, *args, **kwargs):
            if self._is_device(dst):
                self.to_device += 1
            else:
                self.to_host += 1
            return original(dst, *args, **kwargs)

        monkeypatch.setattr(staging, "copy_strided", counted)

    @staticmethod
    def _is_device(address: int) -> bool:
        from cuda.bindings import driver as cu

        err, kind = cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address)
        return err == cu.CUresult.CUDA_SUCCESS and int(kind) == int(cu.CUmemorytype.CU_MEMORYTYPE_DEVICE)


@contextmanager
def _viewer_beside(tmp_path: Path, peer: tuple[str, ...], **parameters) -> Iterator:
    """A viewer node in this process (``parameters`` over headless, no overlay) beside a ``viewer_peer.py`` process
    (``peer``: its arguments).  Torn down in that order: the viewer's node (and so this process's DDS participant)
    first, then the peer's bounded stop, which fails with the peer's stacks if it does not end (viewer_peer.py)."""
    import rclpy
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_tools.viewer import Viewer

    with ViewerPeer(tmp_path, *peer):
        rclpy.init()
        try:
            settings = {"headless": True, "overlay": False, **parameters}
            viewer = Viewer(parameter_overrides=[Parameter(k, value=v) for k, v in settings.items()])
            try:
                yield viewer
            finally:
                viewer.destroy_node()
        finally:
            rclpy.shutdown()


def _timed(longest: dict[str, float], name: str, call):
    """``call``, keeping the longest time it took under ``name`` and how many calls took over 0.5 s (``name`` +
    " over 0.5 s"): which of the viewer's steps a stall is in, and whether it is one stall or every frame."""
    def timed(*args, **kwargs):
        began = time.monotonic()
        try:
            return call(*args, **kwargs)
        finally:
            took = time.monotonic() - began
            longest[name] = max(longest.get(name, 0.0), took)
            if took > 0.5:
                longest[f"{name} over 0.5 s"] = longest.get(f"{name} over 0.5 s", 0) + 1
    return timed


def _spin_until_drawn(viewer, frames: int, timeout: float = 30.0) -> None:
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor()
    executor.add_node(viewer)
    # After other GPU work one executor turn once took 15 s (session 10): time the steps a turn may be in.
    longest: dict[str, float] = {}
    viewer.draw = _timed(longest, "draw", viewer.draw)
    for stream in viewer.streams:  # a frame's interop copy and texture write; a turn longer than both is its read
        stream.show = _timed(longest, "show", stream.show)
    deadline = time.monotonic() + timeout
    slow: list[float] = []  # turns of the executor (a callback each at most) that took over 0.2 s
    while not all(s.drawn >= frames for s in viewer.streams):
        if time.monotonic() >= deadline:  # what came, what was read, refused or stale: where the frames stopped
            stats = viewer.stats()
            for topic in stats["topics"].values():
                del topic["latency_ms"]
            pytest.fail(f"only {[s.drawn for s in viewer.streams]} frames drawn in {timeout} s; the viewer's stats: "
                        f"{json.dumps(stats, default=str)}; last problems: {[s.last_problem for s in viewer.streams]}; "
                        f"{len(slow)} executor turns over 0.2 s, the longest {max(slow, default=0):.2f} s; the longest "
                        f"steps: {json.dumps({k: round(v, 3) for k, v in longest.items()})}; the machine then:\n"
                        f"{machine_state()}")
        began = time.monotonic()
        executor.spin_once(timeout_sec=0.1)
        if time.monotonic() - began > 0.2:
            slow.append(time.monotonic() - began)
    executor.remove_node(viewer)


@pytest.mark.parametrize(("encoding", "tolerance", "value_range"),
                         [("rgba8", 0, ""), ("bgr8", 0, ""), ("mono16", 1, ""), ("32FC1", 1, "")])
def test_interop_draws_cuda_frames_without_a_host_copy(monkeypatch, tmp_path, encoding, tolerance, value_range):
    from test_viewer import expected_rgb

    width, height, topic = 256, 128, f"viewer_cuda_{encoding.lower()}"
    copies = CopyCounter(monkeypatch)
    with _viewer_beside(tmp_path, ("image", encoding, str(width), str(height), "cuda", topic), images=topic,
                        width=width, height=height, value_range=value_range) as viewer:
        _spin_until_drawn(viewer, 3)
        pixels = viewer.draw(capture=True)[:, :, :3].astype(np.float64)
        stream = viewer.streams[0]
        assert stream.layer.upload.name == "interop", stream.layer.upload.reason
        assert stream.layer.host.device_to_host_copies == 0
        assert copies.to_host == 0 and copies.to_device >= 3, (copies.to_host, copies.to_device)
        difference = np.abs(pixels - expected_rgb(encoding, image_pattern(encoding, width, height)))
        assert difference.max() <= tolerance
        print(json.dumps({"encoding": encoding, "path": stream.layer.upload.name, "gpu_copies": copies.to_device,
                          "host_copies": copies.to_host, "max_difference": float(difference.max())}))


def test_auto_range_finds_a_cuda_frames_min_max_on_the_gpu(monkeypatch, tmp_path):
    width, height, topic = 64, 48, "viewer_cuda_auto"
    copies = CopyCounter(monkeypatch)
    with _viewer_beside(tmp_path, ("image", "mono16", str(width), str(height), "cuda", topic), images=topic,
                        width=width, height=height, value_range="auto") as viewer:
        _spin_until_drawn(viewer, 2)
        pixels = viewer.draw(capture=True)[:, :, :3].astype(np.float64)
        stream = viewer.streams[0]
        assert stream.value_range.spec == "auto", "torch or cupy should have found the min/max"
        assert stream.layer.upload.name == "interop" and copies.to_host == 0
        frame = image_pattern("mono16", width, height).astype(np.float64)
        stretched = (frame - frame.min()) / (frame.max() - frame.min()) * 255
        assert np.abs(pixels - np.repeat(stretched, 3, axis=2)).max() <= 1


def test_without_interop_cuda_frames_are_downloaded_and_it_says_why(monkeypatch, tmp_path):
    from test_viewer import expected_rgb

    from ros2_cuda_ipc_tools.viewer import staging

    monkeypatch.setattr(staging, "interop_problem", lambda: "switched off by the test")
    width, height, topic = 64, 48, "viewer_cuda_fallback"
    copies = CopyCounter(monkeypatch)
    with _viewer_beside(tmp_path, ("image", "bgr8", str(width), str(height), "cuda", topic), images=topic,
                        width=width, height=height) as viewer:
        _spin_until_drawn(viewer, 2)
        pixels = viewer.draw(capture=True)[:, :, :3].astype(np.float64)
        stream = viewer.streams[0]
        assert stream.layer.upload.name == "host" and "switched off by the test" in stream.layer.upload.reason
        assert stream.layer.host.device_to_host_copies >= 2 and copies.to_host >= 2 and copies.to_device == 0
        assert np.array_equal(pixels, expected_rgb("bgr8", image_pattern("bgr8", width, height)))


def test_ouster_cloud_from_its_48_byte_points(monkeypatch, tmp_path):
    from ros2_cuda_ipc_tools.viewer.orbit_camera import OrbitCamera

    width, height, topic = 160, 120, "viewer_cuda_ouster"
    copies = CopyCounter(monkeypatch)
    with _viewer_beside(tmp_path, ("cloud", "ouster", "cuda", topic), images="", clouds=topic, width=width,
                        height=height, camera_distance=10.0, point_size=5.0, color_range="0:3") as viewer:
        _spin_until_drawn(viewer, 2)
        lit = viewer.draw(capture=True)[:, :, :3].astype(int).sum(axis=2) > 90
        assert viewer.streams[0].layer.upload.name == "interop" and copies.to_host == 0
        for column, row in OrbitCamera(distance=10).project(CLOUD_POINTS, (width, height)):
            assert lit[int(row), int(column)]
        assert lit.sum() == len(CLOUD_POINTS) * 25


def test_4k_at_60_hz_cpu_per_frame_and_frame_to_screen_latency(monkeypatch, tmp_path):
    copies = CopyCounter(monkeypatch)
    topic = "viewer_cuda_4k"
    with _viewer_beside(tmp_path, ("image", "rgba8", "3840", "2160", "cuda", topic, "60"), images=topic, width=1920,
                        height=1080, overlay=True) as viewer:
        _spin_until_drawn(viewer, 30)  # warm: pool imported, buffers registered
        stream = viewer.streams[0]
        drawn, received, cpu = stream.drawn, stream.received, time.process_time()
        stream.latencies_ms.clear()
        wall = time.monotonic()
        _spin_until_drawn(viewer, drawn + 240, timeout=60)
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        latencies = sorted(stream.latencies_ms)
        result = {"frames_received": stream.received - received, "frames_drawn": stream.drawn - drawn,
                  "seconds": round(wall, 2), "received_fps": round((stream.received - received) / wall, 1),
                  "viewer_cpu_ms_per_frame": round(cpu / (stream.received - received) * 1e3, 2),
                  "latency_ms_p50": round(latencies[len(latencies) // 2], 2),
                  "latency_ms_p99": round(latencies[int(len(latencies) * 0.99)], 2),
                  "path": stream.layer.upload.name, "host_copies": copies.to_host}
        print(json.dumps(result))
        assert stream.layer.upload.name == "interop" and copies.to_host == 0


def test_snapshot_for_the_docs(tmp_path):
    out = Path(os.environ.get("VIEWER_SNAPSHOT_DIR") or os.environ.get("OUT") or tmp_path)
    snapshot = out / "viewer-snapshot-cuda.png"
    # Stopped in turn: the camera (the inner one) first, then the lidar once the camera has ended.
    with ViewerPeer(tmp_path, "cloud", "ouster", "cuda", "viewer_docs_points"), \
            ViewerPeer(tmp_path, "image", "bgr8", "1280", "720", "cuda", "viewer_docs_image"):
        done = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_tools.viewer.cli", "viewer_docs_image",
                               "--cloud", "viewer_docs_points", "--headless", "--snapshot", str(snapshot),
                               "--frames", "30", "--size", "1280x480", "--distance", "8", "--point-size", "6"],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "interop: CUDA frames copied on the GPU" in done.stderr, done.stderr
    assert snapshot.stat().st_size > 0
    print(done.stderr)
