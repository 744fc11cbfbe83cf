"""``BagRecorder``: the node of ``bag_record``; finds each topic's type in the graph and subscribes as it appears.

``GpuImage`` and ``GpuPointCloud2`` topics are leased.  A dense host frame is written to the bag from its own
block, the lease held until it is (at most ``ring_size`` a topic); any other frame is copied once into the
ring on a side stream (after its ready event: the typed reader enqueues that wait on the stream it is
given) and the lease dropped at once (for CUDA it ends when the copy does).  Every other topic is
subscribed raw, its bytes kept as they came.  Nothing in a callback waits on the disk: see
:class:`WriterThread`.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches
from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from ros2_cuda_ipc_core import DEFAULT_CHECK_DELAY, Reader, Ros2CudaIpcError, StaleDescriptorError, cuda_device_count
from ros2_cuda_ipc_image import ImageReader
from ros2_cuda_ipc_msgs.msg import BufferCore
from ros2_cuda_ipc_pointcloud import PointCloudReader

from .frame_ring import FrameRing
from .message_types import MessageTypes, rclpy_class
from .recordings import CloudRecording, CompressedImageRecording, GpuRecording, ImageRecording, JpegEncoder
from .split_writer import SplitBagWriter
from .topic_counts import RecordStatus, TopicCounts
from .writer_thread import QueuedMessage, WriterThread

__all__ = ["BagRecorder"]

_GPU_IMAGE = "ros2_cuda_ipc_msgs/msg/GpuImage"
_GPU_CLOUD = "ros2_cuda_ipc_msgs/msg/GpuPointCloud2"


class BagRecorder(Node):
    """Records ``topics`` into ``sink`` until closed.  ``ring_size`` buffers per GPU topic bound the frames in
    flight (host memory; page-locked for CUDA frames, or device memory when ``jpeg_on_gpu`` encodes them there).
    ``compressed``: images as JPEG through this encoder."""

    def __init__(self, sink: SplitBagWriter, topics: Sequence[str], *, ring_size: int = 8, device: int = 0,
                 compressed: JpegEncoder | None = None, jpeg_on_gpu: bool = False, quality: int = 90,
                 status_period: float = 1.0,
                 print_status: Any = None) -> None:
        super().__init__("bag_record")
        self.sink = sink
        self.status = RecordStatus()
        self.wanted = list(dict.fromkeys(self.resolve_topic_name(t) for t in topics))  # 'a/b' is '/a/b'
        self.types = MessageTypes()
        self.ring_size = ring_size
        self.device = device
        self._compressed = compressed
        self._jpeg_on_gpu = jpeg_on_gpu
        self._quality = quality
        self._reader = Reader()
        self._rings: list[FrameRing] = []
        self._side: dict[int, Any] = {}  # device -> cuda.core side stream
        self._writer = WriterThread(sink, capacity=ring_size * max(len(self.wanted), 1) + 64)
        self._writer.start()
        self._print = print_status
        self._recorded: dict[str, Any] = {}
        self._warm_up_cuda()
        self._discover()
        self.create_timer(0.5, self._discover)
        self._hint_timer: Any = self.create_timer(DEFAULT_CHECK_DELAY, self._hint)
        if print_status is not None:
            self.create_timer(status_period, self._print_status)

    @property
    def error(self) -> BaseException | None:
        """The disk error that stopped the recording, if any."""
        return self._writer.error

    @property
    def waiting(self) -> list[str]:
        return [t for t in self.wanted if t not in self._recorded]

    def _print_status(self) -> None:
        self._print(self.status.line(self._writer.queued, self._writer.capacity, self.sink.bytes_written,
                                     self.sink.files, self.waiting))

    def _discover(self) -> None:
        if not self.waiting:
            return
        graph = dict(self.get_topic_names_and_types())
        for topic in self.waiting:
            if graph.get(topic):
                self._subscribe(topic, graph[topic][0])

    def _hint(self) -> None:
        """Once, ``DEFAULT_CHECK_DELAY`` s in (the delay of core's ``check_topic``): each topic still without a
        publisher, said with the published topics whose names are close to it (a misspelling: ``/cam/imag``)."""
        self.destroy_timer(self._hint_timer)
        if not self.waiting:
            return
        published = {name: kinds for name, kinds in self.get_topic_names_and_types()
                     if self.get_publishers_info_by_topic(name)}
        for topic in self.waiting:
            close = get_close_matches(topic, list(published), n=3, cutoff=0.75)
            there = (f"; published close by: {', '.join(f'{name} ({published[name][0]})' for name in close)}"
                     if close else "")
            self.get_logger().warning(f"{topic}: no publisher after {DEFAULT_CHECK_DELAY:g} s{there}; still "
                                      "waiting for it")

    def _qos(self, topic: str) -> QoSProfile:
        """Reliable unless a publisher is best effort (a reliable subscription would not match it)."""
        best_effort = any(info.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
                          for info in self.get_publishers_info_by_topic(topic))
        return QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT if best_effort
                          else ReliabilityPolicy.RELIABLE)

    def _subscribe(self, topic: str, msgtype: str) -> None:
        recording = self._recording(msgtype)
        bag_type = recording.msgtype if recording is not None else msgtype
        try:
            self.types.ensure(bag_type)
            msgdef, _ = self.types.store.generate_msgdef(bag_type, ros_version=2)
            rihs01 = self.types.store.hash_rihs01(bag_type)
            message_class = rclpy_class(msgtype)
        except Exception as exc:  # BagError, or rosbags refusing a definition: say so once, record the rest
            self.get_logger().error(f"{topic} ({msgtype}) is not recorded: {exc}")
            self._recorded[topic] = None
            return
        self._writer.add_topic(topic, bag_type, msgdef, rihs01)
        counts = self.status.topics[topic] = TopicCounts(bag_type)
        qos = self._qos(topic)
        if recording is None:
            def on_raw(data: bytes) -> None:
                message = QueuedMessage(topic, self.get_clock().now().nanoseconds, counts, raw=data)
                if not self._writer.offer(message):
                    counts.drop("queue_full")

            self._recorded[topic] = self.create_subscription(message_class, topic, on_raw, qos, raw=True)
        else:
            ring = FrameRing(self.ring_size)
            self._rings.append(ring)
            self._recorded[topic] = self.create_subscription(
                message_class, topic, lambda msg: self._on_frame(topic, msg, recording, ring, counts), qos)
        how = ""
        if isinstance(recording, CompressedImageRecording):
            how = ", JPEG of CUDA frames encoded on the GPU" if recording.cuda_ring == "device" else \
                ", JPEG encoded from a host copy"
        self.get_logger().info(f"recording {topic} ({msgtype}) as {bag_type}{how}")

    def _recording(self, msgtype: str) -> GpuRecording | None:
        if msgtype == _GPU_IMAGE:
            reader = ImageReader(self._reader)
            if self._compressed is not None:
                return CompressedImageRecording(self.types, reader, self._compressed, self._quality, self._jpeg_on_gpu)
            return ImageRecording(self.types, reader)
        if msgtype == _GPU_CLOUD:
            return CloudRecording(self.types, PointCloudReader(self._reader))
        return None

    def _warm_up_cuda(self) -> None:
        """Make CUDA's context and the side stream of ``device`` now, before any topic is subscribed: made at the
        first CUDA frame (a few hundred milliseconds), they let the camera reuse the blocks of the frames that
        came meanwhile, and those went stale (5 of 150 at 4K 30 Hz on the H200)."""
        if cuda_device_count() <= self.device:
            return
        try:
            self._side_stream(self.device)
        except Exception as exc:  # a driver it cannot use: CUDA frames then fail at their read, one line each
            self.get_logger().warning(f"CUDA did not start ({type(exc).__name__}: {exc}); CUDA frames will not be "
                                      "recorded")

    def _side_stream(self, device: int) -> Any:
        """The non-blocking side stream downloads of ``device``'s frames run on (made at its first frame)."""
        if device not in self._side:
            from cuda.core import Device

            cuda = Device(device)
            cuda.set_current()
            self._side[device] = cuda.create_stream()
        return self._side[device]

    def _on_frame(self, topic: str, msg: Any, recording: GpuRecording, ring: FrameRing, counts: TopicCounts) -> None:
        received = self.get_clock().now().nanoseconds
        try:
            stream = self._side_stream(int(msg.core.device_id)) if msg.core.memory == BufferCore.MEMORY_CUDA else None
            handle = int(stream.handle) if stream is not None else 0
            view = recording.reader.read(msg, handle)
        except StaleDescriptorError:  # the recorder fell behind and the block moved on: a frame it could not take
            counts.drop("stale")
            return
        except Ros2CudaIpcError as exc:
            counts.add("failed")
            self.get_logger().warning(f"{topic}: frame not recorded: {exc}", throttle_duration_sec=5.0)
            return
        frame, buffer = None, None
        try:
            if view.memory == "cuda":  # buffers made from now on: page-locked, or on the GPU for a GPU encode
                ring.kind, ring.device, ring.stream = recording.cuda_ring, view.handle.device_id, stream
            # A dense host frame goes to the file from its block, under its lease, while the topic holds fewer
            # than ring.in_place_limit such leases (SQLite3 takes one buffer a message: always copied).
            in_place = view.memory == "host" and not self.sink.contiguous and ring.take_in_place()
            try:
                frame = recording.prepare(view, in_place)
                if in_place and frame.source is None:  # not dense: copied after all
                    in_place = False
                    ring.give_in_place()
                if frame.source is None:
                    buffer = ring.take(frame.ring_bytes)
                    if buffer is None:
                        counts.drop("no_buffer")
                        return
                    recording.download(view, frame, buffer, handle)
            except (Ros2CudaIpcError, ValueError) as exc:
                if in_place:
                    if frame is not None:
                        frame.release()
                    ring.give_in_place()
                if buffer is not None:
                    ring.give(buffer)
                counts.add("failed")
                self.get_logger().warning(f"{topic}: frame not recorded: {exc}", throttle_duration_sec=5.0)
                return
            done = stream.record() if stream is not None else None
        finally:
            view.close()  # a frame written in place keeps its block's lease through frame.source; for CUDA the
            # lease ends when the side stream has done the copy
        message = QueuedMessage(topic, received, counts, recording=recording, frame=frame, buffer=buffer, ring=ring,
                                done=done)
        if not self._writer.offer(message):
            message.release()
            counts.drop("queue_full")

    def close(self) -> None:
        """Stop taking frames, write what is queued, close the bag."""
        for subscription in self._recorded.values():
            if subscription is not None:
                self.destroy_subscription(subscription)
        self._recorded = {t: None for t in self._recorded}
        self._writer.close()
        for ring in self._rings:
            ring.close()
        for stream in self._side.values():
            stream.close()
        self._reader.close()
