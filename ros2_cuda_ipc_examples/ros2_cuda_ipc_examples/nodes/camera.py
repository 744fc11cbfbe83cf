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

from ros2_cuda_ipc_core import NodeParameter
from ros2_cuda_ipc_image import ImagePublisher
from ros2_cuda_ipc_tools import run_component

from .pipeline_node import ParameterError
from .scene import RGB_INDEX, Scene
from .source_node import SourceNode

__all__ = ["SyntheticCamera", "main"]

TRANSPORTS = ("ipc", "sensor_msgs")


class SyntheticCamera(SourceNode):
    """Publishes frame after frame of :class:`~ros2_cuda_ipc_examples.nodes.scene.Scene` on ``image``."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("fps", 30.0, "frames a second"),
        NodeParameter("frame_id", "camera", "frame_id of every header"),
        NodeParameter("width", 1920, "image width in pixels"),
        NodeParameter("height", 1080, "image height in pixels"),
        NodeParameter("encoding", "rgb8", f"image encoding ({', '.join(RGB_INDEX)})"),
        NodeParameter("transport", "ipc", "ipc (GpuImage, zero copy) or sensor_msgs (sensor_msgs/Image, copies)"),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("synthetic_camera", **kwargs)
        width = self.parameter("width")
        height = self.parameter("height")
        encoding = self.parameter("encoding")
        self.transport = self.parameter("transport")
        if self.transport not in TRANSPORTS:
            raise ParameterError(f"transport {self.transport!r} is not one of {', '.join(TRANSPORTS)}")
        try:
            self.scene = Scene(width, height, self.arrays, encoding)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        self.get_logger().info(f"{width}x{height} {encoding} at {self.fps:g} fps on {self.memory} memory "
                               f"({self.memory_reason}), transport {self.transport}")
        self._raw: Any = None
        if self.transport == "ipc":
            self.output = ImagePublisher(self, "image", width=width, height=height, encoding=encoding,
                                         block_count=self.block_count, memory=self.memory,  # type: ignore[arg-type]
                                         reuse_delay=self.reuse_delay)
        else:
            self._raw_publisher = self.create_publisher(Image, "image", 2)
            self._encoding = encoding
        self.start_timer()

    def emit(self) -> bool:
        if self.output is not None:
            return self._publish_frame(self.output)
        self._publish_image_msg()
        return True

    def _publish_frame(self, images: ImagePublisher) -> bool:
        frame = images.borrow()
        if frame is None:
            self.busy += 1  # every block is still being read: skip this tick
            return False
        header = self.header()
        with frame, self.arrays.activate():
            self.scene.render(self.arrays.wrap(frame), self.seq)
            frame.publish(self.arrays.stream, header)
        return True

    def _publish_image_msg(self) -> None:
        arrays = self.arrays
        header = self.header()
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

def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(SyntheticCamera, argv))


if __name__ == "__main__":
    main()
