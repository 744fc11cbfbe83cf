"""What the producer and the consumer process agree on: topics, QoS, frame ids, the frame pattern.

Every frame is filled with one byte value that changes from frame to frame, so the consumer's
reduction (the sum of the frame's 64-bit words, which touches every byte) doubles as the check
that it saw this frame's bytes and not an older frame's.
"""

from __future__ import annotations

import time
from typing import Any

COMMAND_TOPIC = "ros2_cuda_ipc_benchmark/commands"
REPORT_TOPIC = "ros2_cuda_ipc_benchmark/reports"
ACK_TOPIC = "ros2_cuda_ipc_benchmark/acks"

#: Frames queued per data topic: enough for the throughput window, small enough that a transport
#: slower than the requested rate shows as drops, not as an ever-growing queue.
DATA_DEPTH = 5
WORD_MASK = (1 << 64) - 1


def data_qos() -> Any:
    from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy

    return QoSProfile(depth=DATA_DEPTH, history=QoSHistoryPolicy.KEEP_LAST, reliability=QoSReliabilityPolicy.RELIABLE)


def control_qos() -> Any:
    from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy

    return QoSProfile(depth=1000, history=QoSHistoryPolicy.KEEP_LAST, reliability=QoSReliabilityPolicy.RELIABLE)


def frame_id(case: int, seq: int) -> str:
    return f"{case} {seq}"


def parse_frame_id(text: str) -> tuple[int, int]:
    case, seq = text.split()
    return int(case), int(seq)


def fill_value(seq: int) -> int:
    """The byte every frame ``seq`` is filled with (never 0, so an unwritten block never passes)."""
    return seq % 251 + 1


def expected_checksum(byte_size: int, seq: int) -> int:
    """The sum, modulo 2**64, of the 64-bit words of a frame of ``byte_size`` bytes filled for ``seq``."""
    word = fill_value(seq) * 0x0101010101010101
    return (byte_size // 8) * word & WORD_MASK


def now_ns() -> int:
    """CLOCK_MONOTONIC, the clock both processes stamp with (one machine)."""
    return time.monotonic_ns()


def set_stamp(header: Any, nanoseconds: int) -> None:
    header.stamp.sec, header.stamp.nanosec = divmod(nanoseconds, 1_000_000_000)


def stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)
