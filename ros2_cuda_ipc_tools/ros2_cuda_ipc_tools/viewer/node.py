"""``Viewer``: a node that draws GpuImage and GpuPointCloud2 topics with OpenGL, without a host copy on a GPU.

    ros2 run ros2_cuda_ipc_tools viewer camera/image --cloud lidar/points
    run_component ros2_cuda_ipc_tools::Viewer --ros-args -p images:=camera/image -p headless:=true \\
        -p snapshot_path:=/tmp/view.png -p frames:=30

Parameters: ``images`` and ``clouds`` (topics, comma-separated), ``headless`` (render offscreen
through EGL), ``snapshot_path`` and ``frames`` (write what was drawn once every topic had that many
frames on screen, then stop the process; at exit when ``frames`` is 0), ``width`` / ``height``,
``value_range`` (mono images: '' for the type's range, 'auto', or LO:HI), ``color_field`` and
``color_range`` (clouds), ``point_size``, ``camera_distance``, ``rate`` (most draws a second) and
``overlay``.  Every frame is copied into GL as it arrives (on the GPU where CUDA-OpenGL interop
works), so its lease goes back at once; draws happen at most ``rate`` times a second, and only
when something changed (or once a second for the overlay), so a silent topic costs no CPU.
A topic with no publisher a few seconds on, or one of another type, is named in one warning
(core's ``check_topic``); the ``viewer`` command exits 1 when a snapshot was asked for and no frame came.
"""

from __future__ import annotations

import math
import time
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data

from ros2_cuda_ipc_core import (
    CudaUnavailableError,
    Reader,
    Ros2CudaIpcError,
    StaleDescriptorError,
    TopicCheck,
    check_topic,
    cuda_device_count,
)
from ros2_cuda_ipc_image import ImageReader
from ros2_cuda_ipc_msgs.msg import BufferCore, GpuImage, GpuPointCloud2
from ros2_cuda_ipc_pointcloud import PointCloudReader

from .cloud_layer import CloudLayer
from .image_layer import ImageLayer
from .orbit_camera import OrbitCamera
from .overlay import Overlay
from .surface import Surface, open_surface
from .topic_stream import CloudStream, ImageStream, TopicStream
from .value_range import ValueRange

__all__ = ["Viewer", "tiles"]

_MAX_SIDE = 16384


def tiles(count: int, size: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """``count`` viewports (x, y from the bottom, width, height) in a near-square grid, first at the top-left."""
    width, height = size
    columns = max(1, math.ceil(math.sqrt(count)))
    rows = max(1, math.ceil(count / columns))
    tile_w, tile_h = width // columns, height // rows
    return [((i % columns) * tile_w, height - (i // columns + 1) * tile_h, tile_w, tile_h) for i in range(count)]


class Viewer(Node):
    """Draws its topics in one window (or offscreen), one tile each; see the module's documentation."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("viewer", **kwargs)
        images = self._topics("images", "image")
        clouds = self._topics("clouds", "")
        if not images and not clouds:
            raise ValueError("nothing to view: give an image topic (images) or a cloud topic (clouds)")
        self.headless = bool(self.declare_parameter("headless", False).value)
        self.snapshot_path = str(self.declare_parameter("snapshot_path", "").value)
        self.frames = int(self.declare_parameter("frames", 0).value)
        size = (int(self.declare_parameter("width", 1280).value), int(self.declare_parameter("height", 720).value))
        rate = float(self.declare_parameter("rate", 60.0).value)
        self.show_overlay = bool(self.declare_parameter("overlay", True).value)
        if not all(16 <= side <= _MAX_SIDE for side in size):
            raise ValueError(f"width and height must be 16..{_MAX_SIDE} pixels, not {size[0]}x{size[1]}")
        if not 0 < rate <= 1000 or self.frames < 0:
            raise ValueError(f"rate ({rate}) must be in (0, 1000] and frames ({self.frames}) not negative")
        image_range = ValueRange(str(self.declare_parameter("value_range", "").value))
        color_field = str(self.declare_parameter("color_field", "intensity").value)
        color_range = str(self.declare_parameter("color_range", "auto").value)
        point_size = float(self.declare_parameter("point_size", 2.0).value)
        distance = float(self.declare_parameter("camera_distance", 30.0).value)
        if not (0 < point_size <= 64 and 0 < distance < 1e5):
            raise ValueError(f"point_size ({point_size}) must be in (0, 64] and camera_distance ({distance}) positive")

        self.surface: Surface = open_surface(size, self.headless, title=f"viewer: {', '.join(images + clouds)}")
        import moderngl  # there now: open_surface said so clearly if not

        self._gl_error: type[Exception] = moderngl.Error
        self.get_logger().info(f"drawing with {self.surface.renderer}"
                               f"{' offscreen (EGL)' if self.headless else ' in a window'}")
        self.reader = Reader()
        self._image_reader, self._cloud_reader = ImageReader(self.reader), PointCloudReader(self.reader)
        ctx = self.surface.ctx
        # A range of each topic's own: 'auto' given up on a CUDA topic (no torch, no cupy) stays on a host topic.
        self.streams: list[TopicStream] = [ImageStream(t, ImageLayer(ctx), ValueRange(image_range.spec))
                                           for t in images]
        self.cameras = [OrbitCamera(distance=distance) for _ in clouds]
        self.streams += [CloudStream(t, CloudLayer(ctx, camera, point_size), ValueRange(color_range), color_field)
                         for t, camera in zip(clouds, self.cameras, strict=True)]
        self._overlays = [Overlay(ctx) for _ in self.streams] if self.show_overlay else []
        self._paths_said: dict[str, str | None] = {s.topic: None for s in self.streams}
        self._cuda_streams: dict[int, Any] = {}
        self._dirty = True
        self._next_overlay = 0.0
        self._stopping = False
        self.snapshots = 0
        self._checks: list[TopicCheck] = []
        group = MutuallyExclusiveCallbackGroup()  # one GL context: never two callbacks at once
        for stream in self.streams:
            kind, reader = (GpuImage, self._image_reader) if isinstance(stream, ImageStream) else \
                (GpuPointCloud2, self._cloud_reader)
            check = check_topic(self, stream.topic, kind)  # a misspelt topic, or one of another type, is said
            self._checks.append(check)
            self.create_subscription(kind, stream.topic, self._receiver(stream, reader, check.cancel),
                                     qos_profile_sensor_data, callback_group=group)
        if self.surface.window is not None:
            self._follow_mouse(self.surface.window)
        self.create_timer(1.0 / rate, self._tick, callback_group=group)

    def _topics(self, name: str, default: str) -> list[str]:
        text = str(self.declare_parameter(name, default).value)
        return [topic.strip() for topic in text.split(",") if topic.strip()]

    def _cuda_stream(self, device: int) -> Any:
        if device not in self._cuda_streams:
            if device >= cuda_device_count():  # a sender's field: not a stream to make (no driver, no such GPU)
                raise CudaUnavailableError(f"the frame is on CUDA device {device}; this machine has "
                                           f"{cuda_device_count()}")
            from cuda.core import Device

            cuda_device = Device(device)
            cuda_device.set_current()
            self._cuda_streams[device] = cuda_device.create_stream()
        return self._cuda_streams[device]

    def _receiver(self, stream: Any, reader: Any, came: Any = None) -> Any:
        def receive(msg: Any) -> None:
            if came is not None:
                came()
            self.surface.make_current()
            try:
                cuda_stream = self._cuda_stream(int(msg.core.device_id)) \
                    if msg.core.memory == BufferCore.MEMORY_CUDA else None
                with reader.read(msg, cuda_stream) as view:
                    stream.note_read(bytes(msg.core.pool_id).hex())
                    stream.show(view, cuda_stream)  # the lease goes back when this block ends
            except StaleDescriptorError:  # the viewer fell behind: counted ("stale" in the overlay), nothing to say
                stream.note_stale()
                return
            except (Ros2CudaIpcError, ValueError, KeyError, self._gl_error) as exc:  # the message's fault: refuse it
                stream.refuse(f"{type(exc).__name__}: {exc}")
                self.get_logger().warning(f"{stream.topic}: not shown: {exc}", throttle_duration_sec=5.0)
                return
            self._say_path(stream)
            self._dirty = True

        return receive

    def _say_path(self, stream: TopicStream) -> None:
        """Log which path a topic's frames take, once, and again only if it changes; and a range given up."""
        path = f"{stream.layer.upload.name}: {stream.layer.upload.reason}"
        if self._paths_said[stream.topic] != path:
            self._paths_said[stream.topic] = path
            self.get_logger().info(f"{stream.topic}: {path}")
        if stream.value_range.fallback_reason:
            self.get_logger().warning(f"{stream.topic}: {stream.value_range.fallback_reason}")
            stream.value_range.fallback_reason = None

    def _tick(self) -> None:
        if self._stopping:
            return
        if not self.surface.poll():
            self._stop("the window was closed")
            return
        now = time.monotonic()
        refresh_overlay = now >= self._next_overlay
        if not (self._dirty or refresh_overlay):
            return
        completes = bool(self.frames) and all(s.drawn + s.has_new_frame >= self.frames for s in self.streams)
        # The snapshot's overlay says what the log says: its counts are this draw's, not a second old.
        pixels = self.draw(refresh_overlay or completes, capture=completes and bool(self.snapshot_path))
        if refresh_overlay:
            self._next_overlay = now + 1.0
        if completes:
            if pixels is not None:
                self.write_snapshot(pixels)
            self._stop(f"every topic had {self.frames} frames drawn ({self._counts()})")

    def _counts(self) -> str:
        """Frames received and drawn of each topic, in the overlay's words."""
        return "; ".join(f"{s.topic}: frames {s.received}, drawn {s.drawn}" for s in self.streams)

    def resolved_topics(self) -> list[str]:
        """The topics viewed, as the subscriptions resolved them (namespace, remappings)."""
        return [check.topic for check in self._checks]

    @property
    def snapshot_missing(self) -> bool:
        """A snapshot was asked for and none could be written: no frame was ever drawn."""
        return bool(self.snapshot_path) and not self.snapshots

    def draw(self, refresh_overlay: bool = True, capture: bool = False) -> Any:
        """Draw every topic's latest frame into its tile, and the overlays; with ``capture``, what was drawn
        ((height, width, 4) RGBA, read before a window's buffer swap leaves the back buffer undefined)."""
        self._dirty = False
        self.surface.begin()
        leases = self.reader.leases_by_pool() if refresh_overlay and self._overlays else {}
        for index, (stream, tile) in enumerate(zip(self.streams, tiles(len(self.streams), self.surface.size),
                                                   strict=True)):
            stream.layer.draw(tile)
            if self._overlays:
                if refresh_overlay:
                    self._overlays[index].set_text(stream.overlay_text(leases))
                self._overlays[index].draw(tile)
        pixels = self.surface.read_pixels() if capture else None
        self.surface.finish()
        now_ns = time.time_ns()
        for stream in self.streams:
            stream.frame_drawn(now_ns)
        return pixels

    def write_snapshot(self, pixels: Any) -> None:
        """Write ``pixels`` (what ``draw`` captured) to ``snapshot_path`` as an RGB PNG."""
        from PIL import Image

        Image.fromarray(pixels[:, :, :3]).save(self.snapshot_path)
        self.snapshots += 1
        self.get_logger().info(f"snapshot: {self.snapshot_path} ({self.surface.size[0]}x{self.surface.size[1]})")

    def _stop(self, why: str) -> None:
        self._stopping = True
        self.get_logger().info(f"stopping: {why}")
        self.context.try_shutdown()

    def _follow_mouse(self, window: Any) -> None:
        import glfw

        def button(_window: Any, _button: int, action: int, _mods: int) -> None:
            x, y = glfw.get_cursor_pos(window)
            for camera in self.cameras:
                camera.press(x, y) if action == glfw.PRESS else camera.release()

        def cursor(_window: Any, x: float, y: float) -> None:
            if any([camera.move(x, y) for camera in self.cameras]):
                self._dirty = True

        def scroll(_window: Any, _dx: float, dy: float) -> None:
            for camera in self.cameras:
                camera.zoom(dy)
            self._dirty = True

        glfw.set_mouse_button_callback(window, button)
        glfw.set_cursor_pos_callback(window, cursor)
        glfw.set_scroll_callback(window, scroll)

    def stats(self) -> dict[str, Any]:
        """Per topic: frames received / drawn / refused, path, latency samples; and the reader's counters."""
        return {"reader": self.reader.stats(), "topics": {
            s.topic: {"received": s.received, "drawn": s.drawn, "refused": s.refused, "reads": s.reads, "stale": s.stale,
                      "path": s.layer.upload.name,
                      "device_to_host_copies": s.layer.host.device_to_host_copies,
                      "latency_ms": list(s.latencies_ms)} for s in self.streams}}

    def destroy_node(self) -> None:
        surface = getattr(self, "surface", None)
        if surface is not None and not surface.closed:
            if self.snapshot_path and not self.snapshots and any(s.drawn for s in self.streams):
                self.write_snapshot(self.draw(capture=True))  # at exit: the last frames, the overlay up to date
            surface.make_current()
            for item in [*(s.layer for s in self.streams), *self._overlays]:
                item.close()
            surface.close()
        for cuda_stream in getattr(self, "_cuda_streams", {}).values():
            cuda_stream.close()
        super().destroy_node()
