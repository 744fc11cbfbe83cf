"""The producer side of a run: one node that publishes every case's frames, paced or as fast as acknowledged.

Each frame is filled (and the fill finished) before it is stamped, so the fill is not counted;
from the stamp on, everything a transport must do is: ros2_cuda_ipc publishes a descriptor of the
block it was filled in, sensor_msgs downloads (GPU), copies into the message and serializes.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .arrays import HostArrays, gpu_arrays, to_message_data
from .cases import SUBSCRIPTION_TRANSPORTS, Case, Plan
from .cpu import CpuSpan
from .kinds import KINDS
from .payloads import Payload
from .protocol import (
    ACK_TOPIC,
    COMMAND_TOPIC,
    REPORT_TOPIC,
    control_qos,
    data_qos,
    fill_value,
    frame_id,
    now_ns,
    parse_frame_id,
    set_stamp,
)

#: How long the producer waits for a throughput acknowledgement (or a free block) before moving on.
STALL_TIMEOUT_S = 2.0


@dataclass
class SentFrames:
    """The producer's account of one case.  The counts of frames not sent are of measured frames, as the
    consumer's counts are: with ``len(send_us)`` they add up to the case's ``frames`` (warm-up frames not sent
    are ``warmup_not_sent``)."""

    sent: int = 0  # every frame sent, warm-up ones included
    late_ticks: int = 0  # latency mode: ticks skipped because the previous frame was still being sent
    no_block: int = 0  # ros2_cuda_ipc: every block still held by the reader
    stalls: int = 0  # throughput mode: acknowledgement waits that timed out
    unsent: int = 0  # throughput mode: frames not sent because the case's time was up
    warmup_not_sent: int = 0
    first_ns: int | None = None  # stamp of the first measured frame
    send_us: list[float] = field(default_factory=list)
    cpu: CpuSpan = field(default_factory=CpuSpan)  # this process's CPU over the measured frames

    def not_sent(self, case: Case, seq: int, cause: str) -> None:
        """Frame ``seq`` was not sent, for ``cause`` (a counter's name): counted there if it is a measured one."""
        if seq < case.warmup:
            self.warmup_not_sent += 1
        else:
            setattr(self, cause, getattr(self, cause) + 1)


class Producer:
    """Publishers for every transport of the plan, created once so discovery happens once."""

    def __init__(self, node: Any, plan: Plan, check_consumer: Callable[[], None]) -> None:
        from std_msgs.msg import String

        self.node = node
        self.plan = plan
        self.check_consumer = check_consumer
        self.host = HostArrays()
        self.gpu = gpu_arrays(plan.gpu_library) if plan.gpu_library else None
        self.typed = {(transport, payload): self._pool_publisher(transport, payload) for transport, payload in plan.pools()}
        self.floor = {kind: node.create_publisher(KINDS[kind].gpu_message, KINDS[kind].gpu_topic, data_qos())
                      for kind in {case.payload.kind for case in plan.cases if case.transport == "floor"}}
        self.sensor = {kind: node.create_publisher(KINDS[kind].sensor_message, KINDS[kind].sensor_topic, data_qos())
                       for kind in {case.payload.kind for case in plan.cases if case.transport == "sensor_msgs"}}
        self._string = String
        self.commands = node.create_publisher(String, COMMAND_TOPIC, control_qos())
        self.acked: dict[int, int] = {}
        self.reports: dict[int, dict[str, Any]] = {}
        self.consumer_ready = False
        node.create_subscription(String, ACK_TOPIC, self._on_ack, control_qos())
        node.create_subscription(String, REPORT_TOPIC, self._on_report, control_qos())
        self._sensor_frames: dict[Payload, Any] = {}

    def _pool_publisher(self, transport: str, payload: Payload) -> Any:
        kind = KINDS[payload.kind]
        delivery = SUBSCRIPTION_TRANSPORTS.get(transport)
        topic = kind.fallback_topic if transport == "fallback" else kind.topic_for(delivery) if delivery else kind.gpu_topic
        return kind.publisher(self.node, topic, payload, self.plan.pool_memory(transport), self.plan.blocks,
                              self.plan.reuse_delay, data_qos())

    # --- talking to the consumer ------------------------------------------------------------------

    def _on_ack(self, msg: Any) -> None:
        case, seq = parse_frame_id(msg.data)
        self.acked[case] = max(seq, self.acked.get(case, -1))

    def _on_report(self, msg: Any) -> None:
        report = json.loads(msg.data)
        if report.get("ready"):
            self.consumer_ready = True
        elif "case" in report:
            self.reports[report["case"]] = report

    def _spin_until(self, done: Callable[[], bool], timeout: float) -> bool:
        import rclpy

        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            self.check_consumer()
            rclpy.spin_once(self.node, timeout_sec=min(0.1, max(0.0, deadline - time.monotonic())))
        return done()

    def wait_for_consumer(self, timeout: float) -> bool:
        """The consumer says ready once it has discovered every publisher of the run."""
        ready = self._spin_until(lambda: self.consumer_ready and self.commands.get_subscription_count() > 0, timeout)
        time.sleep(0.5)  # data writers match their reader about when the control writers do; warm-up frames cover the rest
        return ready

    def _command(self, **fields: Any) -> None:
        self.commands.publish(self._string(data=json.dumps(fields)))

    def finish_case(self, case: Case, sent: SentFrames, timeout: float) -> dict[str, Any] | None:
        """Tell the consumer how many frames were sent; its report, or None if none came within ``timeout``."""
        self._command(end=case.index, sent=sent.sent)
        self._spin_until(lambda: case.index in self.reports, timeout)
        return self.reports.pop(case.index, None)

    def quit(self) -> None:
        self._command(quit=True)

    # --- sending ------------------------------------------------------------------------------------

    def run_case(self, case: Case, progress: Callable[[int], None]) -> SentFrames:
        sent = SentFrames()
        if case.rate:
            self._paced(case, sent, progress)
        else:
            self._acknowledged(case, sent, progress)
        return sent

    def _paced(self, case: Case, sent: SentFrames, progress: Callable[[int], None]) -> None:
        """One frame per tick of ``case.rate``, idle in between; a tick already a period late is skipped."""
        assert case.rate
        period = 1.0 / case.rate
        start = time.monotonic() + period
        for tick in range(case.total_frames):
            delay = start + tick * period - time.monotonic()
            if delay < -period:
                sent.not_sent(case, tick, "late_ticks")
                continue
            if delay > 0:
                time.sleep(delay)
            self._send(case, tick, sent)
            if tick % 10 == 0:
                self.check_consumer()
                progress(tick)

    def _acknowledged(self, case: Case, sent: SentFrames, progress: Callable[[int], None]) -> None:
        """As fast as the consumer keeps up: at most ``in_flight`` frames sent and not yet acknowledged,
        for at most ``case_seconds``."""
        window = self.plan.in_flight
        deadline = time.monotonic() + self.plan.case_seconds
        for seq in range(case.total_frames):
            left = deadline - time.monotonic()
            if left <= 0:
                sent.warmup_not_sent += max(0, case.warmup - seq)
                sent.unsent = case.total_frames - max(seq, case.warmup)
                return
            if not self._spin_until(functools.partial(self._within_window, case.index, seq - window),
                                    min(STALL_TIMEOUT_S, left)):
                sent.stalls += 1
            self._send(case, seq, sent)
            if seq % 10 == 0:
                progress(seq)

    def _within_window(self, case: int, oldest_unacknowledged: int) -> bool:
        return self.acked.get(case, -1) >= oldest_unacknowledged

    def _send(self, case: Case, seq: int, sent: SentFrames) -> None:
        send = {"sensor_msgs": self._send_sensor, "floor": self._send_floor}.get(case.transport, self._send_block)
        stamped = send(case, seq)
        if stamped is None:
            sent.not_sent(case, seq, "no_block")
            return
        sent.sent += 1
        if seq >= case.warmup:
            sent.first_ns = stamped if sent.first_ns is None else sent.first_ns
            sent.send_us.append((now_ns() - stamped) / 1000)
            sent.cpu.frame_done()

    def _header(self, case: Case, seq: int) -> tuple[Any, int]:
        from std_msgs.msg import Header

        header = Header(frame_id=frame_id(case.index, seq))
        stamp = now_ns()
        set_stamp(header, stamp)
        return header, stamp

    def _send_block(self, case: Case, seq: int) -> int | None:
        """ros2_cuda_ipc: fill a borrowed block in place, publish its descriptor (the fallback: its twin then
        leases the block, downloads or copies it and publishes the sensor_msgs message from its worker)."""
        publisher = self.typed[(case.transport, case.payload)]
        arrays = self.gpu if self.plan.pool_memory(case.transport) == "cuda" else self.host
        assert arrays is not None
        frame = publisher.borrow(timeout=STALL_TIMEOUT_S)
        if frame is None:
            return None
        with frame:
            arrays.fill(KINDS[case.payload.kind].frame_bytes(frame), fill_value(seq))
            header, stamp = self._header(case, seq)
            frame.publish(arrays.stream, header)
        return stamp

    def _send_sensor(self, case: Case, seq: int) -> int:
        """sensor_msgs: the frame is downloaded (GPU run), copied into the message and serialized by DDS."""
        arrays = self.gpu if self.plan.memory == "cuda" else self.host
        assert arrays is not None
        payload = case.payload
        frame = self._sensor_frames.get(payload)
        if frame is None:
            frame = self._sensor_frames[payload] = arrays.empty(payload.byte_size)
        arrays.fill(frame, fill_value(seq))
        msg = KINDS[payload.kind].sensor_frame(payload)
        msg.header, stamp = self._header(case, seq)
        msg.data = to_message_data(arrays.download(frame))
        self.sensor[payload.kind].publish(msg)
        return stamp

    def _send_floor(self, case: Case, seq: int) -> int:
        """The same descriptor message with no frame behind it: what DDS alone costs."""
        msg = KINDS[case.payload.kind].floor_frame(case.payload)
        msg.header, stamp = self._header(case, seq)
        self.floor[case.payload.kind].publish(msg)
        return stamp

    def close(self) -> None:
        for publisher in self.typed.values():
            publisher.close()
