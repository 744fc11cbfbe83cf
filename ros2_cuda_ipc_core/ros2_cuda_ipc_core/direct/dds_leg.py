"""``DdsLeg``: a direct subscription's DDS subscription, taken on its delivery thread, never by an executor.

In the node's executor, each frame's DDS copy (a duplicate, once the channel brought the frame) gave the executor's
thread a turn that held the GIL for 80-120 us, while the delivery thread ran that very frame's callback: the callback
waited for it (decisions.md, "The direct subscriber's GIL wait").  So the subscription lives on a hidden node of its
own, ``_<node>_direct_<pid>_<n>`` in the node's namespace, that no executor spins.  A waiter thread blocks in rcl's
wait on it with the GIL released; when a message is in, it hands the delivery thread a drain and waits until that
ran.  Its own turn is a few lines; the takes run on the delivery thread, between callbacks, never beside one.

The subscription's QoS event handlers (rclpy's "incompatible QoS" warnings, what a plain subscription says) are in
the waiter's wait set too, and their callbacks run on the delivery thread.  Not in the node's executor: an event
shares its DDS reader's status condition, which stays raised while a message waits untaken, so rclpy's Python
executor, waiting on the event alone, woke at once again and again for as long as a callback ran: on the H100 a 4K
direct subscriber's process used 2.5 ms more CPU a frame on it than on the events executor, and its callback's work
took 1.7 ms instead of 0.5 (decisions.md, "A direct subscription's QoS events are its waiter's").  An event whose
take fails is said once and waited on no more: the waiter must live, and a raised condition left untaken would spin
it.

The hidden node is the leg's alone: its context does not track it where contexts track nodes (Kilted's shutdown
destroys them before the hook that uses its guard condition to stop the waiter runs; Jazzy's tracks none), and
every live leg's waiter is stopped before the interpreter finalizes (a thread that wakes in rcl's wait then would
abort the process).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, cast

log = logging.getLogger("ros2_cuda_ipc")

#: Messages one drain takes before it lets the delivery thread turn to its channels again.
TAKES_PER_DRAIN = 16
#: How long the interpreter's exit waits for each live leg's waiter to leave (seconds).
_EXIT_JOIN = 1.0

_numbers = itertools.count()
_live: weakref.WeakSet[DdsLeg] = weakref.WeakSet()


class DdsLeg:
    """Subscribe ``message_type`` on ``topic`` (resolved as ``node`` resolves it) with ``qos``; every serialized
    message goes to ``on_serialized``, called on the thread that runs what ``submit`` is given."""

    def __init__(self, node: Any, message_type: type, topic: str, qos: Any, on_serialized: Callable[[bytes], None],
                 submit: Callable[[Callable[[], None]], None]) -> None:
        import rclpy

        self.topic_name: str = node.resolve_topic_name(topic)
        self._context = node.context
        # No global arguments: the name is resolved (remapped) already, and the node's parameters are not its own.
        # Its services make a long node name invalid (about 230 characters): the user's node's, cut, leaves room.
        self._node: Any = rclpy.create_node(f"_{node.get_name()[:100]}_direct_{os.getpid()}_{next(_numbers)}",
                                            namespace=node.get_namespace(), context=self._context,
                                            use_global_arguments=False, enable_rosout=False,
                                            start_parameter_services=False)
        # Kilted's context destroys the nodes it tracks at shutdown, before its shutdown callbacks: this one's
        # handle is held by the waiter until the leg's own hook stops it.  Jazzy's tracks none.
        untrack = getattr(self._context, "untrack_node", None)
        if untrack is not None:
            untrack(self._node)
        self._message_type = message_type
        self._on_serialized = on_serialized
        self._submit = submit
        self._subscription = self._node.create_subscription(message_type, self.topic_name, _never_called, qos,
                                                            raw=True)
        # Its QoS events, waited on by the waiter (a list; Jazzy's rclpy annotates it as one EventHandler).
        self._event_handlers = list(cast("list[Any]", self._subscription.event_handlers))
        self._stop = self._node.create_guard_condition(_never_called)
        self._drained = threading.Event()
        self._closing = False
        self._context.on_shutdown(self._stop_waiter)  # held weakly: it leaves with the leg
        self._thread = threading.Thread(target=self._wait, name=f"{self.topic_name} dds wait", daemon=True)
        _live.add(self)
        self._thread.start()

    @property
    def is_closed(self) -> bool:
        """Whether its waiter has left: closed, or its context shut down."""
        return self._closing and not self._thread.is_alive()

    def close(self) -> None:
        """Stop the waiter and withdraw the subscription (and its hidden node); messages not taken are dropped.  A
        drain under way ends after the message it hands over."""
        if self._node is None:
            return
        self._stop_waiter()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10.0)
        if not self._thread.is_alive():  # else it still waits on them: leave them to the process's end
            node, self._node = self._node, None
            node.destroy_node()
        _live.discard(self)

    def _stop_waiter(self) -> None:
        self._closing = True
        self._drained.set()
        # rclpy's InvalidHandle, a RuntimeError: its guard condition is gone; the waiter has left then.
        with contextlib.suppress(RuntimeError):
            self._stop.trigger()

    # --- the waiter thread ------------------------------------------------------------------------------

    def _wait(self) -> None:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        subscription, stop, events = self._subscription.handle, self._stop.handle, self._event_handlers
        with contextlib.ExitStack() as held:  # none is destroyed while it is waited on
            for entity in (self._context.handle, subscription, stop, *events):
                held.enter_context(entity)
            wait_set = _rclpy.WaitSet(1, 1, 0, 0, 0, len(events), self._context.handle)
            while not self._closing:
                wait_set.clear_entities()
                wait_set.add_subscription(subscription)
                wait_set.add_guard_condition(stop)
                for event in events:
                    event.add_to_wait_set(wait_set)
                try:
                    wait_set.wait(-1)  # the GIL is let go until a message, an event (or the stop) is in
                except Exception:
                    if self._closing or not self._context.ok():
                        return  # the context shut down under the wait
                    raise
                failed = None  # no copy of the list per wake: a failed event is removed after the loop
                for event in events:
                    if event.is_ready(wait_set):
                        try:
                            taken = event.take_data()
                        except Exception as exc:  # rclpy's RCLError for a failed take
                            failed = event
                            log.warning("%s: a QoS event of the subscription could not be taken (%s); its events "
                                        "are no longer watched", self.topic_name, exc)
                            break
                        if taken:
                            self._submit(partial(event.callback, taken))
                if failed is not None:
                    events.remove(failed)
                if subscription.pointer not in wait_set.get_ready_entities("subscription"):
                    continue
                self._drained.clear()  # before the look at _closing: a stop after it sets it again
                if self._closing or not self._context.ok():
                    return
                self._submit(self._drain)
                self._drained.wait()

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
        except RuntimeError:  # rclpy's InvalidHandle: the leg closed (or its context shut down) under the take
            if not self._closing:
                raise
        finally:
            self._drained.set()


def _never_called(*_args: Any) -> None:
    """The hidden node's callbacks: no executor spins it."""


@atexit.register
def _stop_every_waiter() -> None:
    """Before the interpreter finalizes: a waiter that woke in rcl's wait after that would abort the process."""
    legs = list(_live)
    for leg in legs:
        leg._stop_waiter()
    for leg in legs:
        leg._thread.join(timeout=_EXIT_JOIN)


# A forked child has no waiter threads (fork copies only the forking one): nothing to stop at its exit.
os.register_at_fork(after_in_child=_live.clear)
