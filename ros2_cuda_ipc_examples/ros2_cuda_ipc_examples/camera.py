"""``SyntheticCamera``: draws a moving picture straight into borrowed frames and publishes them, zero copy.

    ros2 run ros2_cuda_ipc_examples synthetic_camera --ros-args -p width:=1920 -p height:=1080 -p fps:=30.0

On CUDA memory the picture is drawn by torch (or cupy) on the GPU into the pool block itself;
on host memory by numpy. With ``transport:=sensor_msgs`` it publishes ordinary
``sensor_msgs/Image`` messages instead (one download per frame on CUDA memory): the copy every
process boundary costs without ros2_cuda_ipc, for comparison.
"""

from __future__ import annotations

import array
from typing import Any

import numpy as np
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from ros2_cuda_ipc_image import ImagePublisher

from .arrays import choose_memory
from .pipeline_node import ParameterError
from .run_component import run_component
from .scene import Scene
from .source_node import SourceNode

__all__ = ["SyntheticCamera", "main"]

TRANSPORTS = ("ipc", "sensor_msgs")


class SyntheticCamera(SourceNode):
    """Publishes frame after frame of :class:`~ros2_cuda_ipc_examples.scene.Scene` on ``image``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("synthetic_camera", default_fps=30.0, **kwargs)
        self.images: ImagePublisher | None = None  # destroy_node may run on a node whose parameters were refused
        width = self.parameter("width", 1920)
        height = self.parameter("height", 1080)
        encoding = self.parameter("encoding", "rgb8")
        memory = self.parameter("memory", "auto")
        block_count = self.parameter("block_count", 4)
        self.transport = self.parameter("transport", "ipc")
        self.frame_id = self.parameter("frame_id", "camera")
        if block_count < 2:
            raise ParameterError(f"block_count must be at least 2, not {block_count}")
        if self.transport not in TRANSPORTS:
            raise ParameterError(f"transport {self.transport!r} is not one of {', '.join(TRANSPORTS)}")
        self.memory, why = choose_memory(memory)
        self.get_logger().info(f"{width}x{height} {encoding} at {self.fps:g} fps on {self.memory} memory ({why}), "
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
        self.busy = 0
        self.start_timer()

    def emit(self) -> bool:
        if self.images is not None:
            return self._publish_frame(self.images)
        self._publish_image_msg()
        return True

    def _publish_frame(self, images: ImagePublisher) -> bool:
        frame = images.borrow()
        if frame is None:
            self.busy += 1  # every block is still being read: skip this tick
            return False
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.frame_id)
        with frame, self.arrays.activate():  # type: ignore[union-attr]
            self.scene.render(self.arrays.wrap(frame), self.seq)  # type: ignore[union-attr]
            frame.publish(self.arrays.stream, header)  # type: ignore[union-attr]
        return True

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

    def extra_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {**super().extra_stats(), "memory": self.memory, "acquire_misses": self.busy}
        if self.images is not None:
            stats["leases_held"] = self.images.pool.stats()["blocks_held_by_readers"]
        return stats

    def destroy_node(self) -> None:
        if getattr(self, "images", None) is not None:  # None or unset when the parameters were refused
            self.images.close()  # type: ignore[union-attr]
            self.images = None
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(SyntheticCamera, argv))


if __name__ == "__main__":
    main()
