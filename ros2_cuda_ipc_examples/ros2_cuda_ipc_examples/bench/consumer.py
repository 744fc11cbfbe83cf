"""The consumer process: receives every case's frames, times each step, checks every frame, reports per case.

    python -m ros2_cuda_ipc_examples.bench.consumer PLAN_JSON      (started by ``benchmark``)

Steps, in microseconds, for each frame (stamped by the producer right before it published):
``arrival`` (publish to callback; with ``delivery="direct"`` the read is done by then, and ``read`` is 0),
``read`` (``ImageReader.read``; sensor_msgs: the upload or wrap),
``view`` (``view.kept(torch.from_dlpack)`` / ``view.kept(cupy.from_dlpack)``: one import per block; ``np.asarray``;
sensor_msgs: the reshape),
``wait`` (the consumer stream catching up with the producer), ``ready`` (publish to consumer-ready),
``work`` (the reduction over every byte), ``release`` (dropping the tensor and closing the view), ``total``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ros2_cuda_ipc_core import Ros2CudaIpcError, StaleDescriptorError, executor_factory, run_tool

from .arrays import HostArrays, gpu_arrays
from .cases import SUBSCRIPTION_TRANSPORTS, Case, Plan
from .cpu import CpuSpan
from .kinds import KINDS
from .protocol import (
    ACK_TOPIC,
    COMMAND_TOPIC,
    REPORT_TOPIC,
    control_qos,
    data_qos,
    expected_checksum,
    frame_id,
    now_ns,
    parse_frame_id,
    stamp_ns,
)

PHASES = ("arrival", "read", "view", "wait", "ready", "work", "release", "total")
#: After the producer's "end", a case is reported once every sent frame came, or after this long without one.
DRAIN_S = 2.0


@dataclass
class ReceivedFrames:
    """The consumer's account of one case (counts are of measured frames, ``bad`` of every frame)."""

    received: int = 0
    #: Frames whose account is complete (recorded or dropped): what a case's end waits for.  ``received`` counts a
    #: frame as its handling starts, and a direct subscription's callback runs on its own thread: the executor's
    #: end-of-case check once saw the last frame received but not yet recorded, and the case said 199/200.
    handled: int = 0
    measured: int = 0
    verified: int = 0
    bad: int = 0
    stale: int = 0
    errors: int = 0
    #: Measured frames whose producer had not finished when read: the consumer's stream waited on the GPU (None
    #: for a row that reads no block: the floor, sensor_msgs, the CPU twin).
    gpu_waits: int | None = None
    last_error: str = ""
    last_arrival: float = 0.0
    done_ns: int = 0
    samples: dict[str, list[float]] = field(default_factory=lambda: {phase: [] for phase in PHASES})
    cpu: CpuSpan = field(default_factory=CpuSpan)  # this process's CPU over the measured frames

    def report(self, case: int, subscription_dropped: dict[str, int] | None = None) -> dict[str, Any]:
        samples = {phase: [round(v, 1) for v in values] for phase, values in self.samples.items() if values}
        return {"case": case, "received": self.received, "measured": self.measured, "verified": self.verified,
                "bad": self.bad, "stale": self.stale, "errors": self.errors, "gpu_waits": self.gpu_waits,
                "last_error": self.last_error, "done_ns": self.done_ns, "samples_us": samples,
                "cpu_ms_per_frame": self.cpu.ms_per_frame(), "subscription_dropped": subscription_dropped or {}}


class Consumer:
    def __init__(self, node: Any, plan: Plan) -> None:
        from std_msgs.msg import String

        self.node = node
        self.plan = plan
        self.cases = {case.index: case for case in plan.cases}
        self.host = HostArrays()
        self.gpu = gpu_arrays(plan.gpu_library, plan.consumer_device) if plan.gpu_library else None
        self.frames: dict[int, ReceivedFrames] = {}
        self.ending: dict[int, tuple[int, float]] = {}
        self.quit = False
        self.started = False
        self._string = String
        self.reports = node.create_publisher(String, REPORT_TOPIC, control_qos())
        self.acks = node.create_publisher(String, ACK_TOPIC, control_qos())
        self.expected_publishers = plan.publisher_counts()
        self.subscriptions: list[Any] = []  # the typed subscriptions ("-direct": their callbacks on their threads)
        self._subscription_dropped: dict[str, int] = {}  # their drops by cause when the last case was reported
        for name in {case.payload.kind for case in plan.cases}:
            kind = KINDS[name]
            reader = kind.reader()
            node.create_subscription(kind.gpu_message, kind.gpu_topic,
                                     functools.partial(self.on_gpu_frame, kind, reader), data_qos())
            node.create_subscription(kind.sensor_message, kind.sensor_topic, self.on_sensor_frame, data_qos())
            node.create_subscription(kind.sensor_message, kind.twin_topic, self.on_sensor_frame, data_qos())
            stream = self.gpu.stream if self.gpu is not None else None
            for delivery in {SUBSCRIPTION_TRANSPORTS[case.transport] for case in plan.cases
                             if case.transport in SUBSCRIPTION_TRANSPORTS and case.payload.kind == name}:
                self.subscriptions.append(kind.typed_subscription(
                    node, functools.partial(self.on_subscribed_frame, kind), data_qos(), stream, delivery))
        node.create_subscription(String, COMMAND_TOPIC, self.on_command, control_qos())

    # --- frames -------------------------------------------------------------------------------------

    def on_gpu_frame(self, kind: Any, reader: Any, msg: Any) -> None:
        """A ros2_cuda_ipc descriptor (or the floor's): read, view, wait, reduce, release."""
        arrived = now_ns()
        case, seq = self._start(msg.header)
        if case.transport == "floor":
            self._record(case, seq, stamp_ns(msg.header), arrived, None, True)
            return
        arrays = self.gpu if case.transport == "cuda" else self.host
        assert arrays is not None
        try:
            times = [now_ns()]
            view = reader.read(msg, arrays.stream)
            waited = not view.handle.ready_at_read
            checksum = self._reduce(kind, view, arrays, times)
        except StaleDescriptorError:
            self._dropped(case, seq, "stale")
            return
        except Ros2CudaIpcError as exc:
            self._dropped(case, seq, "errors", str(exc))
            return
        self._record(case, seq, stamp_ns(msg.header), arrived, times,
                     checksum == expected_checksum(case.payload.byte_size, seq), waited)

    def on_subscribed_frame(self, kind: Any, view: Any) -> None:
        """A frame read by a typed subscription (on its thread with ``delivery="direct"``, else the executor's):
        view, wait, reduce, release."""
        arrived = now_ns()
        case, seq = self._start(view.header)
        arrays = self.gpu if case.transport.startswith("cuda") else self.host
        assert arrays is not None
        times = [arrived]
        waited = not view.handle.ready_at_read
        checksum = self._reduce(kind, view, arrays, times)
        self._record(case, seq, stamp_ns(view.header), arrived, times,
                     checksum == expected_checksum(case.payload.byte_size, seq), waited)

    @staticmethod
    def _reduce(kind: Any, view: Any, arrays: Any, times: list[int]) -> int:
        """View the read frame, wait for it, reduce it, release it; ``times`` gets a stamp after each step."""
        with view:
            times.append(now_ns())
            frame = arrays.from_view(kind.view_bytes(view))
            times.append(now_ns())
            arrays.synchronize()
            times.append(now_ns())
            checksum = arrays.checksum(frame)
            times.append(now_ns())
            del frame
        times.append(now_ns())
        return int(checksum)

    def on_sensor_frame(self, msg: Any) -> None:
        """A sensor_msgs Image or PointCloud2: upload (GPU run) or wrap, reshape, reduce."""
        arrived = now_ns()
        case, seq = self._start(msg.header)
        arrays = self.gpu if self.plan.memory == "cuda" else self.host
        assert arrays is not None
        times = [now_ns()]
        flat = arrays.upload(msg.data)
        times.append(now_ns())
        frame = flat.reshape(msg.height, -1)
        times.append(now_ns())
        arrays.synchronize()
        times.append(now_ns())
        checksum = arrays.checksum(frame)
        times.append(now_ns())
        del frame, flat
        times.append(now_ns())
        self._record(case, seq, stamp_ns(msg.header), arrived, times,
                     checksum == expected_checksum(case.payload.byte_size, seq))

    def _start(self, header: Any) -> tuple[Case, int]:
        self.started = True
        index, seq = parse_frame_id(header.frame_id)
        frames = self.frames.setdefault(index, ReceivedFrames())
        frames.received += 1
        frames.last_arrival = time.monotonic()
        return self.cases[index], seq

    def _record(self, case: Case, seq: int, sent: int, arrived: int, times: list[int] | None, good: bool,
                gpu_wait: bool | None = None) -> None:
        frames = self.frames[case.index]
        if not good:
            frames.bad += 1
        if seq >= case.warmup:
            frames.measured += 1
            frames.verified += good
            if gpu_wait is not None:
                frames.gpu_waits = (frames.gpu_waits or 0) + gpu_wait
            samples = frames.samples
            samples["arrival"].append((arrived - sent) / 1000)
            if times is None:  # the floor: ready on arrival
                samples["ready"].append((arrived - sent) / 1000)
                samples["total"].append((arrived - sent) / 1000)
            else:
                for phase, begin, end in zip(("read", "view", "wait", "work", "release"), times[:-1], times[1:], strict=True):
                    samples[phase].append((end - begin) / 1000)
                samples["ready"].append((times[3] - sent) / 1000)
                samples["total"].append((times[5] - sent) / 1000)
            frames.done_ns = now_ns()
            frames.cpu.frame_done()
        frames.handled += 1
        self._ack(case, seq)

    def _dropped(self, case: Case, seq: int, counter: str, error: str = "") -> None:
        frames = self.frames[case.index]
        if seq >= case.warmup:
            setattr(frames, counter, getattr(frames, counter) + 1)
        frames.last_error = error or frames.last_error
        frames.handled += 1
        self._ack(case, seq)

    def _ack(self, case: Case, seq: int) -> None:
        if case.rate is None:
            self.acks.publish(self._string(data=frame_id(case.index, seq)))

    # --- control ------------------------------------------------------------------------------------

    def on_command(self, msg: Any) -> None:
        self.started = True
        command = json.loads(msg.data)
        if command.get("quit"):
            self.quit = True
        elif "end" in command:
            self.ending[command["end"]] = (command["sent"], time.monotonic())

    def announce_ready(self) -> None:
        """Say ready (again) until the producer starts, once every publisher of the run is discovered."""
        if self.started:
            return
        if all(self.node.count_publishers(topic) >= n for topic, n in self.expected_publishers.items()):
            self.reports.publish(self._string(data=json.dumps({"ready": True})))

    def report_finished_cases(self) -> None:
        for index, (sent, told) in list(self.ending.items()):
            frames = self.frames.setdefault(index, ReceivedFrames())
            if frames.handled >= sent or time.monotonic() - max(told, frames.last_arrival) > DRAIN_S:
                dropped = self._subscription_drops() if self.cases[index].transport in SUBSCRIPTION_TRANSPORTS else {}
                self.reports.publish(self._string(data=json.dumps(frames.report(index, dropped))))
                del self.ending[index]

    def _subscription_drops(self) -> dict[str, int]:
        """What the typed subscriptions dropped, by cause, since the last case was reported (cases run one after
        another): a frame they never handed to the callback is "never delivered" here, and this says why.  Their
        duplicates (the DDS copy of each frame delivered directly) are the design, not a drop.  A drop counted after
        a case's report (a late DDS copy found stale) goes to the next such case's."""
        now: dict[str, int] = {}
        for subscription in self.subscriptions:
            for cause, count in subscription.stats()["dropped"].items():
                now[cause] = now.get(cause, 0) + int(count)
        since = {cause: count - self._subscription_dropped.get(cause, 0) for cause, count in now.items()}
        self._subscription_dropped = now
        return {cause: count for cause, count in since.items() if count > 0 and cause != "duplicate"}


def consume(plan: Plan) -> int:
    import rclpy

    parent = os.getppid()
    rclpy.init()
    node = rclpy.create_node("ros2_cuda_ipc_benchmark_consumer")
    executor = executor_factory(plan.executor)()
    executor.add_node(node)
    try:
        consumer = Consumer(node, plan)
        next_announce = 0.0
        while not consumer.quit and os.getppid() == parent:
            executor.spin_once(timeout_sec=0.1)
            if time.monotonic() >= next_announce:
                consumer.announce_ready()
                next_announce = time.monotonic() + 0.25
            consumer.report_finished_cases()
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m ros2_cuda_ipc_examples.bench.consumer PLAN_JSON (started by benchmark)")
    plan = Plan.from_json(json.loads(args[0]))
    raise SystemExit(run_tool(lambda: consume(plan)))


if __name__ == "__main__":
    main()
