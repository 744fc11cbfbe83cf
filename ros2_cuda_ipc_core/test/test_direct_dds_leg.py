"""DdsLeg: a direct subscription's DDS messages are taken on its delivery thread, never by the node's executor.

Real rclpy in one process: a ``String`` publisher, a DdsLeg on the module's node, and a worker thread that runs
what the leg submits, in order, as a DirectReceiver does.  Nothing here spins the node.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

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


def test_a_node_with_the_longest_name_still_gets_its_hidden_node(node):
    long_named = rclpy.create_node("n" * 220, context=node.context)  # near the longest its services allow
    worker = Worker()
    try:
        leg = DdsLeg(long_named, String, "dds_leg/long", 10, lambda data: None, worker.submit)
        leg.close()
        assert leg.is_closed
    finally:
        worker.close()
        long_named.destroy_node()


def test_a_shutdown_after_the_node_was_destroyed_still_stops_its_waiters():
    """The context destroys the nodes it tracks before its shutdown hooks run: the hidden node is not one of them."""
    context = rclpy.Context()
    rclpy.init(context=context)
    own = rclpy.create_node("dds_leg_destroyed_first", context=context)
    worker = Worker()
    legs = [DdsLeg(own, String, f"dds_leg/destroyed_{i}", 10, lambda data: None, worker.submit) for i in range(2)]
    own.destroy_node()
    context.shutdown()
    try:
        assert until(lambda: all(leg.is_closed for leg in legs), 5.0), "a waiter still waits after the shutdown"
    finally:
        began = time.monotonic()
        for leg in legs:
            leg.close()
        assert time.monotonic() - began < 2.0  # no 10 s join of a waiter that never left
        worker.close()


def test_a_drain_queued_before_the_close_hands_over_nothing(node):
    topic = "dds_leg/closed"
    publisher = node.create_publisher(String, topic, 100)
    worker = Worker()
    release = threading.Event()
    worker.submit(lambda: release.wait(timeout=10))  # the delivery thread is busy: the leg's drain waits behind it
    got: list[bytes] = []
    leg = DdsLeg(node, String, topic, 100, got.append, worker.submit)
    try:
        assert until(lambda: publisher.get_subscription_count() == 1)
        publisher.publish(String(data="late"))
        time.sleep(0.3)  # the waiter saw it and queued its drain
        leg.close()
        release.set()
        time.sleep(0.3)
        assert got == []  # closed first: the queued drain took nothing
    finally:
        release.set()
        leg.close()
        worker.close()
        node.destroy_publisher(publisher)


def run_peer(role: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(Path(__file__).with_name("dds_leg_peer.py")), role],
                          capture_output=True, text=True, timeout=60)


def test_a_message_waiting_behind_a_long_callback_does_not_spin_the_nodes_executor(node):
    """Before: the subscription's QoS events were the node's; an event shares its DDS reader's status condition,
    raised while a message waits untaken, so rclpy's executor, waiting on the event, woke at once for as long as the
    delivery thread ran a callback: on the CPU VM, with a 5 ms callback at 30 Hz, its thread used 6.9 ms of CPU a
    frame (0.45 ms after the change).  Now it sleeps out its timeout: a few wakeups in all."""
    from rclpy.executors import SingleThreadedExecutor

    topic = "dds_leg/spin"
    publisher = node.create_publisher(String, topic, 100)
    worker = Worker()
    release = threading.Event()
    got: list[str] = []
    leg = DdsLeg(node, String, topic, 100, lambda data: got.append(deserialize_message(data, String).data),
                 worker.submit)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spun: list[float] = []
    stop = threading.Event()

    def spin() -> None:  # the node's executor, as an application spins it
        began = time.thread_time()
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.25)
        spun.append(time.thread_time() - began)

    spinner = threading.Thread(target=spin, daemon=True)
    try:
        assert until(lambda: publisher.get_subscription_count() == 1)
        worker.submit(lambda: release.wait(timeout=10))  # a long callback: the message waits untaken behind it
        spinner.start()
        publisher.publish(String(data="behind"))
        time.sleep(2.0)
        stop.set()
        spinner.join(timeout=5)
        assert spun and spun[0] < 0.2, f"the executor's thread used {spun} s of CPU in 2 s of one waiting message"
        assert got == []
        release.set()
        assert until(lambda: got == ["behind"]), got
    finally:
        stop.set()
        release.set()
        executor.remove_node(node)
        executor.shutdown()
        leg.close()
        worker.close()
        node.destroy_publisher(publisher)


def test_a_qos_event_that_cannot_be_taken_is_dropped_and_messages_still_come(node, caplog):
    """The waiter takes the subscription's QoS events: a take that fails (rclpy raises RCLError) must not end it
    (its DDS messages would stop without a word), nor leave a raised condition to spin on."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    topic = "dds_leg/event_fails"
    worker = Worker()
    got: list[str] = []
    leg = DdsLeg(node, String, topic, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
                 lambda data: got.append(deserialize_message(data, String).data), worker.submit)
    taken: list[int] = []

    def failing_take() -> None:
        taken.append(1)
        raise RuntimeError("take failed (injected)")

    for handler in leg._event_handlers:
        handler.take_data = failing_take
    incompatible = node.create_publisher(String, topic,
                                         QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    publisher = node.create_publisher(String, topic, 10)
    try:
        assert until(lambda: bool(taken)), "the incompatible publisher raised no QoS event"
        assert until(lambda: publisher.get_subscription_count() == 1)
        publisher.publish(String(data="still"))
        assert until(lambda: got == ["still"]), got
        assert leg._thread.is_alive()
        assert "could not be taken" in caplog.text
    finally:
        leg.close()
        worker.close()
        node.destroy_publisher(publisher)
        node.destroy_publisher(incompatible)


def test_the_interpreter_exits_cleanly_with_a_leg_never_closed_on_a_busy_topic():
    for _ in range(3):  # a waiter woken during finalization aborted it in 3 of 3 runs before the exit hook
        done = run_peer("exit_unclosed")
        assert done.returncode == 0 and "exiting" in done.stdout, (done.returncode, done.stderr[-2000:])


def test_an_incompatible_publisher_is_said_as_for_a_plain_subscription():
    done = run_peer("qos_mismatch")
    assert done.returncode == 0, done.stderr[-2000:]
    # rclpy's own warning for a subscription (its publisher's says "requesting"), run by the leg's waiter
    assert "offering incompatible QoS" in done.stderr, done.stderr[-2000:]
