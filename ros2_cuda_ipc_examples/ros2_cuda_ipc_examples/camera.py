"""``SyntheticCamera``: draws a moving picture straight into borrowed frames and publishes them, zero copy.

    ros2 run ros2_cuda_ipc_examples synthetic_camera --ros-args -p width:=1920 -p height:=1080 -p fps:=30.0

On CUDA memory the picture is drawn by torch (or cupy) on the GPU into the pool block itself;
on host memory by numpy. With ``transport:=sensor_msgs`` it publishes ordinary
``sensor_msgs/Image`` messages instead (one download per frame on CUDA memory): the copy every
process boundary costs without ros2_cuda_ipc, for comparison.
"""

from __future__ import annotations

import array
import time
from typing import Any

import numpy as np
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from ros2_cuda_ipc_image import ImagePublisher

from .arrays import choose_memory
from .pipeline_node import ParameterError, PipelineNode
from .run_component import run_component
from .scene import Scene

__all__ = ["SyntheticCamera", "main"]

TRANSPORTS = ("ipc", "sensor_msgs")


class SyntheticCamera(PipelineNode):
    """Publishes frame after frame of :class:`~ros2_cuda_ipc_examples.scene.Scene` on ``image``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("synthetic_camera", **kwargs)
        self.images: ImagePublisher | None = None  # destroy_node may run on a node whose parameters were refused
        width = self.parameter("width", 1920)
        height = self.parameter("height", 1080)
        fps = self.parameter("fps", 30.0)
        encoding = self.parameter("encoding", "rgb8")
        memory = self.parameter("memory", "auto")
        block_count = self.parameter("block_count", 4)
        self.frames = self.parameter("frames", 0)
        self.seconds = self.parameter("seconds", 0.0)
        self.wait_for_subscribers = self.parameter("wait_for_subscribers", 0)
        self.start_delay = self.parameter("start_delay", 1.0)
        self.transport = self.parameter("transport", "ipc")
        if fps <= 0 or self.frames < 0 or self.seconds < 0 or self.start_delay < 0 or block_count < 2:
            raise ParameterError(f"fps ({fps}) must be positive, frames ({self.frames}), seconds ({self.seconds}) and "
                                 f"start_delay ({self.start_delay}) not negative, block_count ({block_count}) at least 2")
        if self.transport not in TRANSPORTS:
            raise ParameterError(f"transport {self.transport!r} is not one of {', '.join(TRANSPORTS)}")
        self.memory, why = choose_memory(memory)
        self.get_logger().info(f"{width}x{height} {encoding} at {fps:g} fps on {self.memory} memory ({why}), "
                               f"transport {self.transport}")
        self.arrays = self.backend(self.memory)
        if self.arrays is None:
            raise ParameterError(f"no array library for {self.memory} memory")
        try:
            self.scene = Scene(width, height, self.arrays, encoding)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        self._raw: Any = None
        if self.transport == "ipc":
            self.images = ImagePublisher(self, "image", width=width, height=height, encoding=encoding,
                                         block_count=block_count, memory=self.memory)  # type: ignore[arg-type]
        else:
            self._raw_publisher = self.create_publisher(Image, "image", 2)
            self._encoding = encoding
        resolve = getattr(self, "resolve_topic_name", None)  # rclpy newer than Humble's first releases
        self._topic = resolve("image") if resolve is not None else "image"
        self.frame_id = self.parameter("frame_id", "camera")
        self.seq = 0
        self.busy = 0
        self._started: float | None = None
        self._elapsed = 0.0
        self._ready_at: float | None = None
        self.create_timer(1.0 / fps, self._tick)

    @property
    def done(self) -> bool:
        """Whether the camera has sent its ``frames`` or run its ``seconds`` (it then idles, still reporting)."""
        if self.frames and self.seq >= self.frames:
            return True
        return bool(self.seconds and self._started is not None and time.monotonic() - self._started >= self.seconds)

    def _subscribers_ready(self) -> bool:
        if self._ready_at is None:
            if self.count_subscribers(self._topic) < self.wait_for_subscribers:
                return False
            self._ready_at = time.monotonic() + (self.start_delay if self.wait_for_subscribers else 0.0)
        return time.monotonic() >= self._ready_at

    def _tick(self) -> None:
        if self.done or not self._subscribers_ready():
            return
        if self._started is None:
            self._started = time.monotonic()
        if self.images is not None:
            self._publish_frame(self.images)
        else:
            self._publish_image_msg()

    def _publish_frame(self, images: ImagePublisher) -> None:
        frame = images.borrow()
        if frame is None:
            self.busy += 1  # every block is still being read: skip this tick
            return
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.frame_id)
        with frame, self.arrays.activate():  # type: ignore[union-attr]
            self.scene.render(self.arrays.wrap(frame), self.seq)  # type: ignore[union-attr]
            frame.publish(self.arrays.stream, header)  # type: ignore[union-attr]
        self._sent()

    def _publish_image_msg(self) -> None:
        arrays = self.arrays
        assert arrays is not None
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.frame_id)
        with arrays.activate():
            if self._raw is None:
                shape = (self.scene.height, self.scene.width, self.scene.channels)
                self._raw = arrays.upload(np.zeros(shape, dtype=np.uint8))
            self.scene.render(self._raw, self.seq)
            host = arrays.download(self._raw)
        msg = Image(height=self.scene.height, width=self.scene.width, encoding=self._encoding,
                    step=self.scene.width * self.scene.channels)
        msg.header = header
        msg.data = array.array("B", host.tobytes())  # fast on every distro (Humble checks bytes one by one)
        self._raw_publisher.publish(msg)
        self._sent()

    def _sent(self) -> None:
        self.seq += 1
        self.counts["out"] += 1
        if self._started is not None:
            self._elapsed = round(time.monotonic() - self._started, 3)  # first frame to the last one sent

    def extra_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {"memory": self.memory, "acquire_misses": self.busy, "done": self.done,
                                 "elapsed_s": self._elapsed}
        if self.images is not None:
            pool = self.images.pool.stats()
            stats["leases_held"] = pool["blocks_held_by_readers"]
        return stats

    def destroy_node(self) -> None:
        if self.images is not None:
            self.images.close()
            self.images = None
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(SyntheticCamera, argv))


if __name__ == "__main__":
    main()
