"""``Preview``: the one node that copies frames to the CPU, for rviz, rosbag and a PNG snapshot.

    ros2 run ros2_cuda_ipc_examples preview --ros-args -p rate:=2.0 -p snapshot_path:=/tmp/preview.png

Every frame is checked where it lies; at most ``rate`` times a second one is downloaded and
published as ``sensor_msgs/Image`` on ``preview`` and, every ``snapshot_period`` seconds, written
to ``snapshot_path`` as a PNG (not at all when the path is empty).
"""

from __future__ import annotations

import array
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from sensor_msgs.msg import Image

from ros2_cuda_ipc_core import NodeParameter, positive
from ros2_cuda_ipc_tools import run_component

from .arrays import ArrayBackend
from .consumer import ImageConsumer
from .png import write_png
from .scene import rgb_index

__all__ = ["Preview", "main"]


class Preview(ImageConsumer):
    """Checks every frame from ``image``; downloads a few to ``preview`` and ``snapshot_path``."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("rate", 2.0, "downloads a second at most"),
        NodeParameter("snapshot_path", "", "PNG written every snapshot_period seconds (empty: none)"),
        NodeParameter("snapshot_period", 1.0, "seconds between two snapshots"),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("preview", **kwargs)
        self.rate = positive("rate", self.parameter("rate"))
        self.snapshot_path = self.parameter("snapshot_path")
        self.snapshot_period = positive("snapshot_period", self.parameter("snapshot_period"))
        self._out = self.create_publisher(Image, "preview", 2)
        self._last_download = self._last_snapshot = -float("inf")
        self.downloads = self.snapshots = 0
        # PNG compression takes a while at 4K: a worker thread does it (zlib lets go of the GIL), frames keep flowing.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preview_png")
        self._snapshot: Future[None] | None = None
        self.listen()

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        now = time.monotonic()
        if now - self._last_download < 1.0 / self.rate:
            return
        self._last_download = now
        host = np.array(arrays.download(image), dtype=np.uint8, copy=True)  # the lease ends with this callback
        rows, cols, channels = host.shape
        msg = Image(header=header, height=rows, width=cols, encoding=encoding, step=cols * channels)
        msg.data = array.array("B", host.tobytes())  # fast on every distro (Humble checks bytes one by one)
        self._out.publish(msg)
        self.downloads += 1
        self.counts["out"] += 1
        writing = self._snapshot is not None and not self._snapshot.done()
        if self.snapshot_path and now - self._last_snapshot >= self.snapshot_period and not writing:
            self._last_snapshot = now
            order = list(rgb_index(encoding)) + ([3] if channels == 4 else [])
            self._snapshot = self._writer.submit(write_png, self.snapshot_path, host[:, :, order])
            self.snapshots += 1

    def destroy_node(self) -> None:
        writer = getattr(self, "_writer", None)  # None when the parameters were refused
        if writer is not None:
            writer.shutdown(wait=True)  # the last snapshot is written whole
        super().destroy_node()

    def extra_stats(self) -> dict[str, Any]:
        return {**super().extra_stats(), "downloads": self.downloads, "snapshots": self.snapshots,
                "snapshot_path": self.snapshot_path}


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(Preview, argv))


if __name__ == "__main__":
    main()
