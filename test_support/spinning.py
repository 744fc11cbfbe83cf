"""Test support (not shipped) for tests of nodes in one process: spin them, and subscribe and publish meanwhile."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def spin_until(executor: Any, done: Callable[[], Any], timeout: float = 10.0) -> bool:
    """Spin ``executor`` until ``done()`` is true or ``timeout`` seconds have passed; return ``done()``."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
    return bool(done())


@contextmanager
def spinning(node: Any, *tested: Any) -> Iterator[Any]:
    """A single-threaded executor of the ``tested`` nodes and the test's own ``node``; on the way out the tested
    nodes leave it and are destroyed (the test's node is the fixture's to destroy)."""
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor()
    for each in (*tested, node):
        executor.add_node(each)
    try:
        yield executor
    finally:
        for each in tested:
            executor.remove_node(each)
            each.destroy_node()
        executor.remove_node(node)


@contextmanager
def received(node: Any, message_type: type, topic: str) -> Iterator[list[Any]]:
    """The messages ``node`` receives on ``topic`` while the block lasts (its subscription is destroyed after)."""
    got: list[Any] = []
    subscription = node.create_subscription(message_type, topic, got.append, 10)
    try:
        yield got
    finally:
        node.destroy_subscription(subscription)


@contextmanager
def publishing(node: Any, message_type: type, topic: str) -> Iterator[Any]:
    """A publisher of ``node`` on ``topic`` for the block (destroyed after)."""
    publisher = node.create_publisher(message_type, topic, 10)
    try:
        yield publisher
    finally:
        node.destroy_publisher(publisher)


def events_executor_unavailable() -> str | None:
    """Why rclpy's C++ events executor cannot run here (Humble's rclpy has no rclpy.experimental; Jazzy's 7.1 and
    Kilted's have it), or None: core's own look-up, the one ``--executor events`` goes through."""
    from ros2_cuda_ipc_core import executor_factory

    try:
        executor_factory("events")
    except ValueError as exc:
        return str(exc)
    return None
