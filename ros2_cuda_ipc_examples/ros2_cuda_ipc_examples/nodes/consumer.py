"""``ImageConsumer``: the part every example consumer shares: read a frame, check it, time it.

A consumer subscribes to ``image`` (``GpuImage`` through an ``ImageSubscription``: zero-copy, or the
camera's CPU twin when its pool cannot be mapped from here; or ``sensor_msgs/Image`` with
``transport:=sensor_msgs``, uploaded to the GPU when ``memory`` is CUDA, which is what a process
boundary costs without ros2_cuda_ipc), reads the frame number from the picture, checks sampled
pixels against it, hands the zero-copy array to :meth:`ImageConsumer.process`, and records the
latency from the camera's stamp once the work is done.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sensor_msgs.msg import Image

from ros2_cuda_ipc_core import NodeParameter
from ros2_cuda_ipc_image import ImageReader, ImageSubscription

from .arrays import ArrayBackend, choose_memory
from .pipeline_node import ParameterError, PipelineNode
from .scene import Probe, rgb_index

__all__ = ["ImageConsumer"]


class ImageConsumer(PipelineNode):
    """Subclasses implement :meth:`process` and call :meth:`listen` once ready; ``resized`` inputs (a DNN tensor)
    are checked within a tolerance."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("transport", "ipc", "ipc (GpuImage) or sensor_msgs (sensor_msgs/Image, uploaded)"),
        NodeParameter("memory", "auto", "with transport sensor_msgs: where frames are uploaded to (auto, cuda or host)"),
        NodeParameter("delivery", "executor", "with transport ipc: executor, or direct (each frame on the subscription's "
                                              "own thread as it arrives on the pool's connection)"),
    )

    #: The topic read, and whether its images are a resized copy of the camera's.
    input_topic = "image"
    resized = False

    def __init__(self, default_name: str, **kwargs: Any) -> None:
        super().__init__(default_name, **kwargs)
        self.transport = self.parameter("transport")
        self.reader = ImageReader(node=self, topic=self.input_topic)
        self._probes: dict[tuple[int, int], tuple[Probe, Any, Any]] = {}
        self.prepare_gpu()
        memory = self.parameter("memory")  # declared whatever the transport: only sensor_msgs frames use it
        if self.transport == "sensor_msgs":
            self.upload_memory, why = choose_memory(memory)
            self.get_logger().info(f"sensor_msgs/Image frames are uploaded to {self.upload_memory} memory ({why})")
        elif self.transport != "ipc":
            raise ParameterError(f"transport {self.transport!r} is not one of ipc, sensor_msgs")
        self.delivery = self.parameter("delivery")
        if self.delivery not in ("executor", "direct"):
            raise ParameterError(f"delivery {self.delivery!r} is not one of executor, direct")

    def listen(self) -> None:
        """Subscribe to the input: the last step of a subclass's constructor, once it is ready for frames."""
        if self.transport == "ipc":
            self.subscribe_frames(ImageSubscription, self.input_topic, self._on_view, reader=self.reader,
                                  delivery=self.delivery)
        else:
            self.subscribe(Image, self.input_topic, self._on_image_msg, 2)

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        """Do this node's work on ``image``: a zero-copy, read-only (rows, cols, channels) array on
        ``arrays``' stream, of ``encoding`` (see :func:`~ros2_cuda_ipc_examples.nodes.scene.rgb_index`), valid only
        during this call: keep a copy, never the array."""

    def probe_values(self, image: Any, probe: Probe, ys: Any, xs: Any, arrays: ArrayBackend) -> np.ndarray:
        """The pixels at the probe's points as 0..255 values, on the host (this waits for the frame's work)."""
        return arrays.download(image[ys, xs])

    def _probe(self, rows: int, cols: int, arrays: ArrayBackend) -> tuple[Probe, Any, Any]:
        key = (rows, cols)
        if key not in self._probes:
            probe = Probe.for_image(rows, cols, resized=self.resized)
            self._probes[key] = (probe, arrays.upload(probe.ys), arrays.upload(probe.xs))
        return self._probes[key]

    def picture(self, image: Any, arrays: ArrayBackend) -> Any:
        """The (rows, cols, channels) picture in what :meth:`process` gets, which the probe checks: ``image`` itself
        here; a tensor consumer's first image, channels last."""
        return image

    def _consume(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        picture = self.picture(image, arrays)
        probe, ys, xs = self._probe(picture.shape[0], picture.shape[1], arrays)
        self.process(image, header, encoding, arrays)
        seq, good = probe.check(self.probe_values(picture, probe, ys, xs, arrays), rgb_index(encoding))
        self.frame_seen(seq)
        self.counts["checked" if good else "bad"] += 1
        if not good:
            self.get_logger().warning(f"frame {seq} does not hold the picture it should", throttle_duration_sec=5.0)
        self.latency_from(header.stamp)

    def _on_view(self, view: Any, arrays: ArrayBackend) -> None:
        image = arrays.read(view)  # valid in this callback only: process() keeps no reference to it
        self._consume(image, view.header, view.encoding, arrays)
        del image

    def _on_image_msg(self, msg: Image) -> None:
        self.counts["in"] += 1
        arrays = self.backend(self.upload_memory)
        if arrays is None:
            self.counts["bad"] += 1
            return
        channels = msg.step // msg.width if msg.width else 0
        rows = np.frombuffer(msg.data, dtype=np.uint8).reshape(msg.height, msg.step)
        host = rows[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
        with arrays.activate():
            self._consume(arrays.upload(host), msg.header, msg.encoding, arrays)

    def extra_stats(self) -> dict[str, Any]:
        stats = self.reader.stats()
        return {"reads": stats["reads"], "same_process_reads": stats["same_process_reads"],
                "leases_held": stats["leases_held"], "imports": stats["imports"]}
