"""Real processes of test_direct_dds_leg: ``exit_unclosed`` (a leg never closed, its topic busy, then the
interpreter's exit) and ``qos_mismatch`` (a reliable leg, a best-effort publisher, the node spun for 3 s)."""

from __future__ import annotations

import sys
import threading
import time

import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ros2_cuda_ipc_core.direct.dds_leg import DdsLeg


def submit_inline(work) -> None:
    threading.Thread(target=work, daemon=True).start()


def exit_unclosed() -> None:
    rclpy.init()
    node = rclpy.create_node("dds_leg_exit")
    publisher = node.create_publisher(String, "dds_leg/exit", 10)
    DdsLeg(node, String, "dds_leg/exit", 10, lambda data: None, submit_inline)

    def flood() -> None:
        while True:
            publisher.publish(String(data="x"))
            time.sleep(0.0005)

    threading.Thread(target=flood, daemon=True).start()
    time.sleep(1.0)
    print("exiting", flush=True)  # no close, no shutdown: the interpreter's exit meets a busy waiter


def qos_mismatch() -> None:
    rclpy.init()
    node = rclpy.create_node("dds_leg_qos")
    DdsLeg(node, String, "dds_leg/qos", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
           lambda data: None, submit_inline)
    node.create_publisher(String, "dds_leg/qos", QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)


if __name__ == "__main__":
    {"exit_unclosed": exit_unclosed, "qos_mismatch": qos_mismatch}[sys.argv[1]]()
