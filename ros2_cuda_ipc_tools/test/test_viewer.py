"""The viewer on host memory: what it draws (read back with glReadPixels) against the frames real publishers sent.

Headless tests render through EGL (Mesa's llvmpipe here); window tests open a GLFW window on the
display in DISPLAY or on an Xvfb the ``display`` fixture starts.  Each runs the ``viewer`` command
line as its own process beside a publisher process (viewer_peer.py).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from gl_marks import needs_egl
from peers import line_with
from viewer_peer import CLOUD_POINTS, image_pattern

from ros2_cuda_ipc_tools.viewer.cloud_layer import PointFormat
from ros2_cuda_ipc_tools.viewer.image_layer import texture_format
from ros2_cuda_ipc_tools.viewer.node import tiles
from ros2_cuda_ipc_tools.viewer.orbit_camera import OrbitCamera
from ros2_cuda_ipc_tools.viewer.staging import FrameBytes, HostStaging
from ros2_cuda_ipc_tools.viewer.value_range import ValueRange

PEER = str(Path(__file__).with_name("viewer_peer.py"))
VIEWER = [sys.executable, "-m", "ros2_cuda_ipc_tools.viewer.cli"]


def expected_rgb(encoding: str, frame: np.ndarray) -> np.ndarray:
    """What the viewer should draw for ``frame`` with the default range: RGB, 0..255 floats."""
    values = frame.astype(np.float64)
    if encoding.startswith("bgr"):
        return values[:, :, 2::-1]
    if encoding.startswith("rgb"):
        return values[:, :, :3]
    scale = {"mono8": 1.0, "mono16": 255.0 / 65535.0, "32FC1": 255.0}[encoding]
    return np.repeat(np.clip(values * scale, 0, 255), 3, axis=2)


def read_png(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB")).astype(np.float64)


def run_viewer(publisher: list[str], viewer_args: list[str], env: dict[str, str] | None = None) -> str:
    """Start the publisher, run the viewer to its end (rc 0 asserted), stop the publisher; the viewer's log."""
    peer = subprocess.Popen([sys.executable, PEER, *publisher], stdout=subprocess.DEVNULL)
    try:
        done = subprocess.run([*VIEWER, *viewer_args], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **(env or {})})
    finally:
        peer.send_signal(signal.SIGTERM)
        peer.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stderr


@needs_egl
@pytest.mark.parametrize(("encoding", "tolerance"), [("rgba8", 0), ("bgr8", 0), ("mono8", 0), ("mono16", 1),
                                                    ("32FC1", 1)])
def test_headless_draws_the_frame(tmp_path, encoding, tolerance):
    width, height, topic = 64, 48, f"viewer_test_{encoding.lower()}"
    snapshot = tmp_path / "drawn.png"
    log = run_viewer(["image", encoding, str(width), str(height), "host", topic],
                     [topic, "--headless", "--snapshot", str(snapshot), "--frames", "2", "--size", f"{width}x{height}",
                      "--no-overlay"])
    assert "host: the frames are in host memory" in log  # which path runs, said once
    drawn = read_png(snapshot)
    difference = np.abs(drawn - expected_rgb(encoding, image_pattern(encoding, width, height)))
    assert difference.max() <= tolerance, f"{int((difference > tolerance).sum())} values off by up to {difference.max()}"


@needs_egl
def test_auto_range_stretches_a_mono16_frame(tmp_path):
    width, height, topic = 32, 24, "viewer_test_auto"
    snapshot = tmp_path / "drawn.png"
    run_viewer(["image", "mono16", str(width), str(height), "host", topic],
               [topic, "--headless", "--snapshot", str(snapshot), "--frames", "1", "--size", f"{width}x{height}",
                "--no-overlay", "--range", "auto"])
    frame = image_pattern("mono16", width, height).astype(np.float64)
    stretched = (frame - frame.min()) / (frame.max() - frame.min()) * 255
    assert np.abs(read_png(snapshot) - np.repeat(stretched, 3, axis=2)).max() <= 1


@pytest.mark.parametrize("layout", ["ouster", "xyzi", "velodyne"])
@needs_egl
def test_cloud_points_land_where_the_camera_projects_them(tmp_path, layout):
    width, height, topic = 160, 120, f"viewer_test_cloud_{layout}"
    snapshot = tmp_path / "cloud.png"
    run_viewer(["cloud", layout, "host", topic],
               ["--cloud", topic, "--headless", "--snapshot", str(snapshot), "--frames", "2", "--size",
                f"{width}x{height}", "--no-overlay", "--distance", "10", "--point-size", "5", "--color-range", "0:3"])
    drawn = read_png(snapshot)
    lit = drawn.sum(axis=2) > 90
    expected = OrbitCamera(distance=10).project(CLOUD_POINTS, (width, height))
    assert abs(expected[0] - (width / 2, height / 2)).max() < 1e-9  # the target is the centre: the test's own check
    for column, row in expected:
        assert lit[int(row), int(column)], f"no point drawn at ({column:.1f}, {row:.1f})"
    assert lit.sum() == len(CLOUD_POINTS) * 25, "points drawn elsewhere too (or missing)"
    if layout != "velodyne":  # xyzrgb-free layouts with an intensity field: blue (0) at the centre, red (3) on top
        centre, top = drawn[int(expected[0][1]), int(expected[0][0])], drawn[int(expected[3][1]), int(expected[3][0])]
        assert centre[2] > 200 and centre[0] < 50 and top[0] > 200 and top[2] < 50


def test_window_draws_the_frame(tmp_path, display):
    width, height, topic = 64, 48, "viewer_test_window"
    snapshot = tmp_path / "window.png"
    log = run_viewer(["image", "rgba8", str(width), str(height), "host", topic],
                     [topic, "--snapshot", str(snapshot), "--frames", "2", "--size", f"{width}x{height}",
                      "--no-overlay"], env={"DISPLAY": display})
    assert "in a window" in log
    assert np.array_equal(read_png(snapshot), image_pattern("rgba8", width, height)[:, :, :3].astype(np.float64))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_silent_topic_waits_without_spinning_and_a_signal_ends_it(display, stop):
    viewer = subprocess.Popen([*VIEWER, "viewer_test_never_published", "--size", "320x240"],
                              env={**os.environ, "DISPLAY": display}, stderr=subprocess.PIPE, text=True)
    try:
        line_with(viewer.stderr, "in a window")  # the window is open: its first log line says so
        time.sleep(1.0)
        before = _cpu_seconds(viewer.pid)
        time.sleep(3.0)
        used = _cpu_seconds(viewer.pid) - before
        # A core spinning would be 3 s; measured here: 0.15 s (the 60 Hz tick and a once-a-second overlay draw).
        assert used < 1.0, f"the viewer used {used:.2f} s of CPU in 3 s with nothing to show"
        viewer.send_signal(stop)
        assert viewer.wait(timeout=30) == 0
    finally:
        viewer.kill()
        viewer.wait()


@needs_egl
def test_a_silent_topic_shows_waiting(tmp_path):
    import rclpy
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_tools.viewer import Viewer

    rclpy.init()
    try:
        viewer = Viewer(parameter_overrides=[Parameter("images", value="viewer_test_silent"),
                                             Parameter("headless", value=True), Parameter("width", value=320),
                                             Parameter("height", value=240)])
        try:
            pixels = viewer.draw(capture=True)
            assert "waiting for the first image" in viewer._overlays[0].text
            corner, rest = pixels[2:30, 2:150, :3], pixels[200:, :, :3]
            assert (rest == rest[0, 0]).all(), "only the overlay is drawn before a frame comes"
            assert (corner != rest[0, 0]).any(axis=2).sum() > 50, "the overlay's text is not drawn"
        finally:
            viewer.destroy_node()
    finally:
        rclpy.shutdown()


@needs_egl
def test_a_misspelt_topic_and_one_of_another_type_are_named_and_a_snapshot_never_made_fails(tmp_path):
    """Before: the viewer logged only 'drawing with llvmpipe', and on Ctrl-C exited 0 without the snapshot asked for
    and without saying that no frame had come."""
    peers = [subprocess.Popen([sys.executable, PEER, *args], stdout=subprocess.DEVNULL)
             for args in (["image", "rgba8", "32", "24", "host", "viewer_test_spelt"],
                          ["cloud", "xyzi", "host", "viewer_test_a_cloud"])]
    snapshot = tmp_path / "never.png"
    viewer = subprocess.Popen([*VIEWER, "viewer_test_spelt_wrong", "viewer_test_a_cloud", "--headless", "--snapshot",
                               str(snapshot), "--frames", "2", "--size", "64x48"], stderr=subprocess.PIPE, text=True)
    try:
        said = [line_with(viewer.stderr, ": no publisher (after 3 s)"), line_with(viewer.stderr, ": published as ")]
        viewer.send_signal(signal.SIGINT)
        rest = viewer.communicate(timeout=30)[1]
    finally:
        viewer.kill()
        for peer in peers:
            peer.send_signal(signal.SIGTERM)
            peer.wait(timeout=30)
    assert "/viewer_test_spelt_wrong: no publisher (after 3 s); ros2_cuda_ipc_msgs/msg/GpuImage is published on " \
           "/viewer_test_spelt" in said[0], said
    assert "/viewer_test_a_cloud: published as ros2_cuda_ipc_msgs/msg/GpuPointCloud2, not " \
           "ros2_cuda_ipc_msgs/msg/GpuImage" in said[1], said
    assert viewer.returncode == 1 and not snapshot.exists(), rest
    assert rest.strip().splitlines()[-1] == (f"viewer: no frame came on /viewer_test_spelt_wrong, /viewer_test_a_cloud: "
                                             f"no snapshot written to {snapshot}"), rest


@needs_egl
def test_the_snapshot_s_overlay_counts_what_the_stop_says(tmp_path):
    """Before: the overlay said 'frames 12' (its text a second old) where the log said 'every topic had 20 frames on
    screen'.  Now the last draw's overlay and the stop line give the same counts."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_tools.viewer import Viewer

    peer = subprocess.Popen([sys.executable, PEER, "image", "rgba8", "32", "24", "host", "viewer_test_counts"],
                            stdout=subprocess.DEVNULL)
    rclpy.init()
    try:
        viewer = Viewer(parameter_overrides=[Parameter("images", value="viewer_test_counts"),
                                             Parameter("headless", value=True), Parameter("frames", value=10),
                                             Parameter("snapshot_path", value=str(tmp_path / "counts.png")),
                                             Parameter("width", value=320), Parameter("height", value=240)])
        executor = SingleThreadedExecutor()
        executor.add_node(viewer)
        deadline = time.monotonic() + 60
        while rclpy.ok() and time.monotonic() < deadline:  # until the viewer stops itself, with the snapshot
            executor.spin_once(timeout_sec=0.1)
        stream = viewer.streams[0]
        assert viewer.snapshots == 1 and stream.drawn == 10, (viewer.snapshots, stream.drawn)
        assert f"frames {stream.received}  drawn 10  refused 0" in viewer._overlays[0].text, viewer._overlays[0].text
        assert viewer._counts() == f"viewer_test_counts: frames {stream.received}, drawn 10"
        executor.remove_node(viewer)
        viewer.destroy_node()
    finally:
        rclpy.try_shutdown()
        peer.send_signal(signal.SIGTERM)
        peer.wait(timeout=30)


@needs_egl
def test_a_frame_it_cannot_draw_is_refused_and_the_other_topics_go_on():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_tools.viewer import Viewer

    peers = [subprocess.Popen([sys.executable, PEER, "image", encoding, "32", "24", "host", topic],
                              stdout=subprocess.DEVNULL)
             for encoding, topic in (("16UC3", "viewer_test_refused"), ("rgba8", "viewer_test_drawn"))]
    rclpy.init()
    try:
        viewer = Viewer(parameter_overrides=[Parameter("images", value="viewer_test_refused,viewer_test_drawn"),
                                             Parameter("headless", value=True), Parameter("width", value=320),
                                             Parameter("height", value=240)])
        executor = SingleThreadedExecutor()
        executor.add_node(viewer)
        refused, drawn = viewer.streams
        deadline = time.monotonic() + 60
        while (refused.refused < 2 or drawn.drawn < 2) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert refused.refused >= 2 and refused.received == 0 and drawn.drawn >= 2
        assert "16UC3" in refused.last_problem
        viewer.draw()
        assert "16UC3" in viewer._overlays[0].text  # the overlay says why nothing is shown
        executor.remove_node(viewer)
        viewer.destroy_node()
    finally:
        rclpy.shutdown()
        for peer in peers:
            peer.send_signal(signal.SIGTERM)
            peer.wait(timeout=30)


@needs_egl
def test_a_cuda_frame_of_a_device_this_machine_lacks_is_refused_not_fatal():
    """A sender's ``device_id`` chooses the CUDA stream: one this machine has no such device for (every device
    where there is no GPU) is the message's fault, refused like any invalid frame."""
    import rclpy
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_core import cuda_device_count
    from ros2_cuda_ipc_image import ImagePublisher
    from ros2_cuda_ipc_msgs.msg import BufferCore
    from ros2_cuda_ipc_tools.viewer import Viewer

    rclpy.init()
    try:
        viewer = Viewer(parameter_overrides=[Parameter("images", value="viewer_test_no_such_device"),
                                             Parameter("headless", value=True)])
        try:
            with ImagePublisher(viewer, "viewer_test_no_such_device", width=32, height=24, encoding="rgba8",
                                memory="host") as pub:
                msg = pub.publish_array(np.zeros((24, 32, 4), np.uint8))
            msg.core.memory, msg.core.device_id = BufferCore.MEMORY_CUDA, cuda_device_count()
            viewer._receiver(viewer.streams[0], viewer._image_reader)(msg)  # the subscription's callback
            stream = viewer.streams[0]
            assert (stream.refused, stream.received) == (1, 0)
            assert f"CUDA device {cuda_device_count()}" in stream.last_problem
        finally:
            viewer.destroy_node()
    finally:
        rclpy.shutdown()


@needs_egl
def test_auto_range_given_up_on_one_topic_stays_on_the_others():
    """``auto`` falls back to the type's range where no GPU library can read a CUDA frame: on that topic only, not
    on a host topic beside it, whose min / max numpy finds."""
    import rclpy
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_tools.viewer import Viewer

    rclpy.init()
    try:
        viewer = Viewer(parameter_overrides=[Parameter("images", value="viewer_test_gpu,viewer_test_host"),
                                             Parameter("value_range", value="auto"),
                                             Parameter("headless", value=True)])
        try:
            gpu, host = (stream.value_range for stream in viewer.streams)
            gpu.fallback_reason, gpu.spec = "no min/max on the GPU", ""  # what _min_max does when it gives up
            frame = np.array([[10, 20], [30, 40]], dtype=np.uint16)
            assert host.of(frame, "host", frame.dtype) == (10.0, 40.0)
        finally:
            viewer.destroy_node()
    finally:
        rclpy.shutdown()


def test_the_command_line_refuses_what_it_cannot_do():
    assert subprocess.run([*VIEWER, "--bogus"], capture_output=True).returncode == 2
    bad = subprocess.run([*VIEWER, "--headless", "--size", "8x8"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "width and height" in bad.stderr
    bad = subprocess.run([*VIEWER, "--headless", "--range", "9:1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "LO < HI" in bad.stderr
    helped = subprocess.run([*VIEWER, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--headless" in helped.stdout


def test_no_display_says_use_headless():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run([*VIEWER, "some_topic"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1 and "--headless" in done.stderr


def test_the_viewer_is_a_registered_component():
    from ros2_cuda_ipc_tools import component_class
    from ros2_cuda_ipc_tools.viewer import Viewer

    assert component_class("ros2_cuda_ipc_tools::Viewer") is Viewer


# The pieces, without GL.

def test_tiles_fill_the_surface_top_left_first():
    assert tiles(1, (640, 480)) == [(0, 0, 640, 480)]
    assert tiles(3, (640, 480)) == [(0, 240, 320, 240), (320, 240, 320, 240), (0, 0, 320, 240)]


def test_value_ranges():
    assert ValueRange("").of(np.arange(4, dtype=np.uint16), "host", np.dtype(np.uint16)) == (0.0, 65535.0)
    assert ValueRange("auto").of(np.array([3.0, np.nan, 7.0], np.float32), "host", np.dtype(np.float32)) == (3.0, 7.0)
    assert ValueRange("auto").of(np.full(3, 5, np.uint8), "host", np.dtype(np.uint8)) == (5.0, 6.0)
    assert ValueRange("-1:2.5").of(None, "host", np.dtype(np.float32)) == (-1.0, 2.5)
    for bad in ("1", "a:b", "2:1", "0:inf"):
        with pytest.raises(ValueError):
            ValueRange(bad)


def test_auto_range_on_the_gpu_looks_for_a_missing_torch_once(monkeypatch):
    """A CUDA frame's min / max through cupy where torch is not installed: torch is looked for on the first frame
    only, not on every frame (a failed import searches sys.path each time). cupy is a stand-in made of numpy here:
    what is tested is where the range looks, not a GPU."""
    import types

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed: the range never looks past it")
    lookups = []

    class CountTorchLookups(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                lookups.append(name)
            return None

    stand_in = types.SimpleNamespace(asarray=np.asarray, nanmin=np.nanmin, nanmax=np.nanmax)
    monkeypatch.setitem(sys.modules, "cupy", stand_in)
    monkeypatch.setattr(sys, "meta_path", [CountTorchLookups(), *sys.meta_path])
    value_range = ValueRange("auto")
    for frame in range(3):
        values = np.array([frame, frame + 5], dtype=np.float32)
        assert value_range.of(values, "cuda", values.dtype) == (frame, frame + 5)
    assert lookups == ["torch"]


def test_texture_formats():
    assert texture_format("bgra8", np.dtype(np.uint8), 4).swizzle == "BGR1"
    assert texture_format("16UC1", np.dtype(np.uint16), 1).dtype == "nu2"
    with pytest.raises(ValueError, match="16UC3"):
        texture_format("16UC3", np.dtype(np.uint16), 3)
    with pytest.raises(ValueError):
        texture_format("64FC1", np.dtype(np.float64), 1)


def test_point_formats_read_each_field_at_its_offset_with_the_points_stride():
    ouster = PointFormat(48, 0, 16, np.dtype(np.float32))
    assert (ouster.position, ouster.value) == ("3f4 36x", "16x f4 28x")
    ring = PointFormat(48, 0, 26, np.dtype(np.uint16))
    assert ring.value == "26x u2 20x"
    assert PointFormat(12, 0, None, None).value is None
    with pytest.raises(ValueError):
        PointFormat(10, 0, None, None)
    with pytest.raises(ValueError):
        PointFormat(16, 0, 12, np.dtype(">f4"))


def test_host_staging_packs_padded_rows_and_passes_packed_frames_through():
    padded = np.zeros((4, 8), dtype=np.uint8)  # 4 rows of 6 bytes used, 8-byte pitch
    padded[:, :6] = np.arange(24, dtype=np.uint8).reshape(4, 6)
    staging = HostStaging()
    frame = FrameBytes(padded.ctypes.data, "host", 0, (4, 2), (8, 3), 3)
    assert not frame.is_packed and frame.nbytes == 24
    assert np.array_equal(staging.stage(frame), np.arange(24, dtype=np.uint8))
    dense = np.arange(24, dtype=np.uint8)
    packed = FrameBytes(dense.ctypes.data, "host", 0, (4, 2), (6, 3), 3)
    assert packed.is_packed
    assert staging.stage(packed).ctypes.data == dense.ctypes.data  # no copy before GL's own
    assert staging.device_to_host_copies == 0


@needs_egl
def test_each_tile_counts_its_own_topics_reads():
    """Issue 36: each tile said 'reads 77 stale 2' (the process's reader's totals) where one topic had 57 frames
    and the other 20. Two topics at 20 and 5 frames a second: each tile's reads are its own, and they add up to the
    reader's."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_tools.viewer import Viewer

    peers = [subprocess.Popen([sys.executable, PEER, "image", "rgba8", "32", "24", "host", topic, fps],
                              stdout=subprocess.DEVNULL)
             for topic, fps in (("viewer_test_fast", "20"), ("viewer_test_slow", "5"))]
    rclpy.init()
    try:
        viewer = Viewer(parameter_overrides=[Parameter("images", value="viewer_test_fast,viewer_test_slow"),
                                             Parameter("headless", value=True), Parameter("width", value=320),
                                             Parameter("height", value=240)])
        executor = SingleThreadedExecutor()
        executor.add_node(viewer)
        fast, slow = viewer.streams
        deadline = time.monotonic() + 60
        while (slow.reads < 5 or fast.reads <= slow.reads) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        viewer.draw()
        reads = viewer.reader.stats()["reads"]
        texts = [overlay.text for overlay in viewer._overlays]
        assert slow.reads >= 5 and fast.reads > slow.reads and fast.reads + slow.reads == reads, (fast.reads, slow.reads)
        assert [f"reads {fast.reads}  stale {fast.stale}  leases 0" in texts[0],
                f"reads {slow.reads}  stale {slow.stale}  leases 0" in texts[1]] == [True, True], texts
        assert viewer.stats()["topics"]["viewer_test_slow"]["reads"] == slow.reads
        executor.remove_node(viewer)
        viewer.destroy_node()
    finally:
        rclpy.shutdown()
        for peer in peers:  # one at a time (Fast DDS 3.2's deletion deadlock: docs/decisions.md)
            peer.send_signal(signal.SIGTERM)
            peer.wait(timeout=30)
