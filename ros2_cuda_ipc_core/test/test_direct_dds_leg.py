"""DdsLeg: a direct subscription's DDS messages are taken on its delivery thread, never by the node's executor.

Real rclpy in one process: a ``String`` publisher, a DdsLeg on the module's node, and a worker thread that runs
what the leg submits, in order, as a DirectReceiver does.  Nothing here spins the node.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import rclpy
from rclpy.serialization import deserialize_message
from std_msgs.msg import String

from ros2_cuda_ipc_core.direct.dds_leg import TAKES_PER_DRAIN, DdsLeg


class Worker:
    """Runs submitted callables one at a time, in order, on its own thread (the delivery thread's part)."""

    def __init__(self) -> None:
        self._work: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def submit(self, work: Callable[[], None]) -> None:
        self._work.put(work)

    def _run(self) -> None:
        while (work := self._work.get()) is not None:
            work()

    def close(self) -> None:
        self._work.put(None)
        self.thread.join(timeout=5)


def until(done: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    return done()


def hidden_nodes(node, prefix: str) -> list[str]:
    return [name for name, _ns in node.get_node_names_and_namespaces() if name.startswith(prefix)]


def test_every_message_is_taken_in_order_on_the_delivery_thread_and_none_by_the_executor(node):
    topic = "dds_leg/order"
    publisher = node.create_publisher(String, topic, 100)
    worker = Worker()
    got: list[str] = []
    threads: set[threading.Thread] = set()

    def on_serialized(data: bytes) -> None:
        got.append(deserialize_message(data, String).data)
        threads.add(threading.current_thread())

    leg = DdsLeg(node, String, topic, 100, on_serialized, worker.submit)
    try:
        assert leg.topic_name == "/dds_leg/order"
        assert until(lambda: publisher.get_subscription_count() == 1)
        sent = [str(i) for i in range(3 * TAKES_PER_DRAIN + 5)]  # more than one drain takes
        for data in sent:
            publisher.publish(String(data=data))
        assert until(lambda: len(got) == len(sent)), got
        assert got == sent
        assert threads == {worker.thread}
        # Nothing on the node for an executor to wait on: the subscription is the hidden node's.
        assert not [sub for sub in node.subscriptions if sub.topic_name == "/dds_leg/order"]
        assert [info.node_name for info in node.get_subscriptions_info_by_topic(topic)] == \
            hidden_nodes(node, f"_{node.get_name()}_direct_")
    finally:
        leg.close()
        worker.close()
        node.destroy_publisher(publisher)
    assert leg.is_closed
    assert until(lambda: not hidden_nodes(node, f"_{node.get_name()}_direct_")), "close() left its hidden node"


def test_a_worker_busy_elsewhere_loses_nothing_and_the_waiter_waits_for_its_drain(node):
    topic = "dds_leg/busy"
    publisher = node.create_publisher(String, topic, 100)
    worker = Worker()
    release = threading.Event()
    worker.submit(lambda: release.wait(timeout=10))  # a long callback: the leg's drain queues behind it
    got: list[str] = []
    leg = DdsLeg(node, String, topic, 100, lambda data: got.append(deserialize_message(data, String).data),
                 worker.submit)
    try:
        assert until(lambda: publisher.get_subscription_count() == 1)
        for i in range(40):
            publisher.publish(String(data=str(i)))
        time.sleep(0.3)
        assert got == []  # nothing taken beside the running callback
        release.set()
        assert until(lambda: len(got) == 40), got
        assert got == [str(i) for i in range(40)]
    finally:
        release.set()
        leg.close()
        worker.close()
        node.destroy_publisher(publisher)


def test_its_waiter_ends_when_the_context_shuts_down_without_a_close():
    context = rclpy.Context()
    rclpy.init(context=context)
    own = rclpy.create_node("dds_leg_shutdown", context=context)
    worker = Worker()
    leg = DdsLeg(own, String, "dds_leg/shutdown", 10, lambda data: None, worker.submit)
    assert not leg.is_closed
    context.shutdown()
    try:
        assert until(lambda: leg.is_closed, 5.0), "the waiter still waits after its context shut down"
    finally:
        leg.close()
        worker.close()
        own.destroy_node()
