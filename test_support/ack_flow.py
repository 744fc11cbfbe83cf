"""Test support (not shipped) for multi-process pipelines: acknowledgement-based flow control over a real topic.

A publisher that must prove *every* message is read cannot outrun its readers by more than
its pool: ``AckGate`` holds it back until the slowest subscriber has acknowledged, and
``Acker`` acknowledges only once this process's lease is really given back (CUDA leases go
back asynchronously); :func:`publish_acknowledged` and :func:`receive_acknowledged` are the two
ends of such a run.  The root ``conftest.py`` puts this folder on ``sys.path`` and ``PYTHONPATH``, so
tests and the peer processes they start import it as ``ack_flow``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

_QOS_DEPTH = 100


def ack_qos() -> Any:
    """Reliable, deep enough that no acknowledgement or test message is dropped."""
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy

    return QoSProfile(depth=_QOS_DEPTH, reliability=QoSReliabilityPolicy.RELIABLE)


class AckGate:
    """Publisher side: tracks the last sequence number each subscriber acknowledged on ``topic``.

    Its waits raise ``TimeoutError`` saying what was acknowledged, rather than let the publisher carry on
    into a run that can then only time out.
    """

    def __init__(self, node: Any, topic: str) -> None:
        from std_msgs.msg import String

        self._node = node
        self.acked: dict[str, int] = {}
        node.create_subscription(String, topic, self._on_ack, ack_qos())

    def _on_ack(self, msg: Any) -> None:
        name, seq = msg.data.split()
        self.acked[name] = max(int(seq), self.acked.get(name, -1))

    def _spin_until(self, done: Callable[[], bool], timeout: float, waiting_for: str) -> None:
        import rclpy

        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            rclpy.spin_once(self._node, timeout_sec=0.005)
        if not done():
            raise TimeoutError(f"{waiting_for}, for {timeout:g} s; acknowledged so far: {self.acked}")

    def wait_for_subscribers(self, count: int, matched: Callable[[], int], timeout: float = 60.0) -> None:
        """Until ``count`` subscribers have acknowledged -1 (they listen) and the data publisher has matched as
        many subscriptions (``matched()``): an acknowledgement proves the way back only, and a message
        published before its subscription matched never reaches it."""
        self._spin_until(lambda: len(self.acked) >= count and matched() >= count, timeout,
                         f"waited for {count} subscriber(s) to listen and match (DDS discovery)")

    def wait_until_within(self, seq: int, window: int, timeout: float = 30.0) -> None:
        """Block until message ``seq`` is at most ``window`` ahead of the slowest subscriber."""
        self._spin_until(lambda: seq - min(self.acked.values(), default=-1) <= window, timeout,
                         f"message {seq} waited to be within {window} of the slowest subscriber")


class Acker:
    """Subscriber side: acknowledge a sequence number once ``reader`` holds no lease any more."""

    def __init__(self, node: Any, topic: str, name: str, reader: Any) -> None:
        from std_msgs.msg import String

        self._string = String
        self._publisher = node.create_publisher(String, topic, ack_qos())
        self._name = name
        self._reader = reader

    def spin_until_received(self, node: Any, received: Any, count: int, timeout: float = 200.0) -> None:
        """Spin ``node`` until ``received()`` reaches ``count``, announcing this subscriber (ack -1) until the first
        message arrives; then give the last acknowledgement a moment to leave."""
        import rclpy

        deadline = time.monotonic() + timeout
        while received() < count and time.monotonic() < deadline:
            if received() == 0:
                self.ack(-1)
            rclpy.spin_once(node, timeout_sec=0.05)
        time.sleep(0.2)

    def ack(self, seq: int, release_timeout: float = 2.0) -> None:
        deadline = time.monotonic() + release_timeout
        while self._reader.stats()["leases_held"] and time.monotonic() < deadline:
            time.sleep(0.0002)
        self._publisher.publish(self._string(data=f"{self._name} {seq}"))


def publish_acknowledged(node: Any, topic: str, count: int, window: int, publish: Callable[[int], None],
                         matched: Callable[[], int], subscribers: int = 1) -> None:
    """``publish(seq)`` for seq 0 .. count-1 once ``subscribers`` acknowledge on ``topic``'s acks and the publisher
    has matched them (``matched()``, its matched subscription count), never more than ``window`` (a pool's block
    count) ahead of the slowest; return once they have acknowledged the last one."""
    gate = AckGate(node, f"{topic}_acks")
    gate.wait_for_subscribers(subscribers, matched)
    for seq in range(count):
        gate.wait_until_within(seq, window)
        publish(seq)
    gate.wait_until_within(count - 1, 0, timeout=60)


def receive_acknowledged(node: Any, topic: str, message_type: type, count: int, reader: Any,
                         check: Callable[[Any, int], list[str]], name: str = "reader",
                         item: str = "message") -> dict[str, Any]:
    """Check ``count`` messages on ``topic`` with ``check(msg, seq) -> problems`` and acknowledge each once
    ``reader`` (a core ``Reader``) has given its lease back; ``verified`` counts those without problems,
    ``errors`` lists the problems (an exception in ``check`` is one, named by ``item`` and number)."""
    acker = Acker(node, f"{topic}_acks", name, reader)
    result: dict[str, Any] = {"verified": 0, "errors": []}
    seen = [0]

    def on_message(msg: Any) -> None:
        seq = seen[0]
        try:
            problems = check(msg, seq)
        except Exception as exc:  # a stale or invalid read is a finding, not a crash
            problems = [f"{item} {seq}: {type(exc).__name__}: {exc}"]
        result["errors"].extend(problems)
        result["verified"] += not problems
        acker.ack(seq)
        seen[0] += 1

    node.create_subscription(message_type, topic, on_message, ack_qos())
    acker.spin_until_received(node, lambda: seen[0], count)
    return result
