"""``DdsLeg``: a direct subscription's DDS subscription, taken on its delivery thread, never by an executor.

In the node's executor, each frame's DDS copy (a duplicate, once the channel brought the frame) gave the executor's
thread a turn that held the GIL for 80-120 us, while the delivery thread ran that very frame's callback: the callback
waited for it (decisions.md, "The direct subscriber's GIL wait").  So the subscription lives on a hidden node of its
own, ``_<node>_direct_<n>`` in the node's namespace, that no executor spins.  A waiter thread blocks in rcl's wait on
it with the GIL released; when a message is in, it hands the delivery thread a drain and waits until that ran.  Its
own turn is a few lines; the takes run on the delivery thread, between callbacks, never beside one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

#: Messages one drain takes before it lets the delivery thread turn to its channels again.
TAKES_PER_DRAIN = 16

_numbers = itertools.count()


class DdsLeg:
    """Subscribe ``message_type`` on ``topic`` (resolved as ``node`` resolves it) with ``qos``; every serialized
    message goes to ``on_serialized``, called on the thread that runs what ``submit`` is given."""

    def __init__(self, node: Any, message_type: type, topic: str, qos: Any, on_serialized: Callable[[bytes], None],
                 submit: Callable[[Callable[[], None]], None]) -> None:
        import rclpy

        self.topic_name: str = node.resolve_topic_name(topic)
        self._context = node.context
        # No global arguments: the name is resolved (remapped) already, and the node's parameters are not its own.
        self._node: Any = rclpy.create_node(f"_{node.get_name()}_direct_{os.getpid()}_{next(_numbers)}",
                                       namespace=node.get_namespace(), context=self._context,
                                       use_global_arguments=False, enable_rosout=False,
                                       start_parameter_services=False)
        self._message_type = message_type
        self._on_serialized = on_serialized
        self._submit = submit
        self._subscription = self._node.create_subscription(message_type, self.topic_name, _never_called, qos,
                                                            raw=True)
        self._stop = self._node.create_guard_condition(_never_called)
        self._drained = threading.Event()
        self._closing = False
        self._shutdown_hook = _stop_on_shutdown(self)
        self._context.on_shutdown(self._shutdown_hook)
        self._thread = threading.Thread(target=self._wait, name=f"{self.topic_name} dds wait", daemon=True)
        self._thread.start()

    @property
    def is_closed(self) -> bool:
        """Whether its waiter has left: closed, or its context shut down."""
        return self._closing and not self._thread.is_alive()

    def close(self) -> None:
        """Stop the waiter and withdraw the subscription (and its hidden node); messages not taken are dropped."""
        if self._node is None:
            return
        self._closing = True
        self._drained.set()
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10.0)
        if not self._thread.is_alive():  # else it still waits on them: leave them to the process's end
            node, self._node = self._node, None
            node.destroy_node()

    # --- the waiter thread ------------------------------------------------------------------------------

    def _wait(self) -> None:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        subscription, stop = self._subscription.handle, self._stop.handle
        with self._context.handle, subscription, stop:  # none is destroyed while it is waited on
            wait_set = _rclpy.WaitSet(1, 1, 0, 0, 0, 0, self._context.handle)
            while not self._closing:
                wait_set.clear_entities()
                wait_set.add_subscription(subscription)
                wait_set.add_guard_condition(stop)
                try:
                    wait_set.wait(-1)  # the GIL is let go until a message (or the stop) is in
                except Exception:
                    if self._closing or not self._context.ok():
                        return  # the context shut down under the wait
                    raise
                if self._closing or not self._context.ok():
                    return
                if subscription.pointer in wait_set.get_ready_entities("subscription"):
                    self._drained.clear()
                    self._submit(self._drain)
                    self._drained.wait()

    def _wake(self) -> None:
        # rclpy's InvalidHandle, a RuntimeError: the context shut down and destroyed it; the waiter has left then.
        with contextlib.suppress(RuntimeError):
            self._stop.trigger()

    # --- the delivery thread ----------------------------------------------------------------------------

    def _drain(self) -> None:
        """Take up to ``TAKES_PER_DRAIN`` messages, each to ``on_serialized``; then the waiter may wait again."""
        try:
            handle = self._subscription.handle
            with handle:
                for _ in range(TAKES_PER_DRAIN):
                    if self._closing:
                        return
                    taken = handle.take_message(self._message_type, True)
                    if taken is None:
                        return
                    self._on_serialized(taken[0])
        except RuntimeError:  # rclpy's InvalidHandle: the context shut down under the take, which ends the leg
            if not self._closing:
                raise
        finally:
            self._drained.set()


def _never_called(*_args: Any) -> None:
    """The hidden node's callbacks: no executor spins it."""


def _stop_on_shutdown(leg: DdsLeg) -> Callable[[], None]:
    """A shutdown hook that stops ``leg``'s waiter without keeping ``leg`` alive."""
    ref = weakref.ref(leg)

    def hook() -> None:
        found = ref()
        if found is not None:
            found._closing = True
            found._drained.set()
            found._wake()

    return hook
