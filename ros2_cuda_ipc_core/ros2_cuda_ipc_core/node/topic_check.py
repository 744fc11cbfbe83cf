"""Say why a subscribed topic brings nothing: no publisher at all, or publishers of another message type.

A subscription on a misspelled topic, or on a topic of another type, gets nothing and says nothing (DDS
never matches a reader with a writer of another type).  :func:`check_topic` looks at the ROS graph once,
``delay`` seconds after it is called (discovery has had its time), and logs one warning naming the topic
and what it found there (a topic of the expected type whose name is close to it first: "did you mean ...?");
where a publisher of an expected type is there, or :meth:`TopicCheck.cancel`
was called because a message came, it says nothing.

    check = check_topic(node, "image", "ros2_cuda_ipc_msgs/msg/GpuImage")   # or GpuImage, the class
    ...                                                                    # in the callback: check.cancel()
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["DEFAULT_CHECK_DELAY", "TopicCheck", "check_topic", "message_type_name"]

#: Seconds after a subscription is made before its topic is looked at.
DEFAULT_CHECK_DELAY = 3.0
_NAMED = 3  # topics of the expected type named in the warning, at most
_CLOSE = 0.8  # difflib's ratio from which another topic's name is taken for a typo of this one (/cam/imag, /cam/image)


def message_type_name(message_type: type | str) -> str:
    """``pkg/msg/Type`` as the ROS graph spells a type, of a message class or of such a name (``pkg/Type`` too)."""
    if isinstance(message_type, str):
        package, _, name = message_type.partition("/")
        return message_type if message_type.count("/") == 2 or not name else f"{package}/msg/{name}"
    package, interface = message_type.__module__.split(".")[:2]  # pkg.msg._type_name
    return f"{package}/{interface}/{message_type.__name__}"


class TopicCheck:
    """The look at one topic, ``delay`` s after it was made (once); :func:`check_topic` makes it."""

    def __init__(self, node: Any, topic: str, expected: Sequence[type | str], delay: float) -> None:
        if not expected:
            raise ValueError("check_topic needs the message type (or types) the topic should carry")
        self._node = node
        resolve = getattr(node, "resolve_topic_name", None)  # rclpy newer than Humble's first releases
        self.topic = str(resolve(topic)) if resolve is not None else topic
        self.expected = [message_type_name(kind) for kind in expected]
        self.delay = delay
        self.found: str | None = None  #: what was logged, once the look was taken (None: nothing to say, or not yet)
        self._lock = threading.Lock()
        self._timer: Any = node.create_timer(delay, self._look)

    def cancel(self) -> None:
        """A message came: there is nothing to look at (call it from the subscription's callback, on any thread)."""
        if self._timer is None:
            return
        with self._lock:  # the executor's look and a delivery thread's message may cancel at once
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            self._node.destroy_timer(timer)

    def _look(self) -> None:
        self.cancel()
        self.found = self.problem()
        if self.found is not None:
            self._node.get_logger().warning(self.found)

    def problem(self) -> str | None:
        """What the graph has on the topic now, when no publisher of an expected type is there; else None."""
        types = self._published_types(self.topic)
        wanted = " or ".join(self.expected)
        if types & set(self.expected):
            return None
        waited = f"after {self.delay:g} s"
        if types:
            return (f"{self.topic}: published as {', '.join(sorted(types))}, not {wanted} ({waited}): none of its "
                    "messages can arrive here")
        # A topic's types in the graph include its subscribers' (this one's too): ask for its publishers'.
        elsewhere = sorted(name for name, kinds in self._node.get_topic_names_and_types()
                           if set(kinds) & set(self.expected) and self._published_types(name) & set(self.expected))
        closest = difflib.get_close_matches(self.topic, elsewhere, n=_NAMED, cutoff=_CLOSE)
        elsewhere = closest + [name for name in elsewhere if name not in closest]  # the likeliest typo's fix first
        there = (f"{wanted} is published on {', '.join(elsewhere[:_NAMED])}{' ...' if len(elsewhere) > _NAMED else ''}"
                 if elsewhere else f"nothing publishes {wanted}")
        hint = f"; did you mean {closest[0]}?" if closest else ""
        return f"{self.topic}: no publisher ({waited}); {there}{hint}"

    def _published_types(self, topic: str) -> set[str]:
        return {info.topic_type for info in self._node.get_publishers_info_by_topic(topic)}


def check_topic(node: Any, topic: str, message_types: type | str | Sequence[type | str],
                delay: float = DEFAULT_CHECK_DELAY) -> TopicCheck:
    """In ``delay`` seconds, log once (a warning of ``node``'s logger) what the graph has on ``topic`` when that is
    not a publisher of ``message_types`` (classes or ``pkg/msg/Type`` names): nothing, or another type.

    ``topic`` is resolved as the node's subscriptions resolve it (namespace, remappings).  Call
    :meth:`TopicCheck.cancel` when a message comes, so that a working topic costs no look at the graph."""
    expected = [message_types] if isinstance(message_types, (str, type)) else list(message_types)
    return TopicCheck(node, topic, expected, delay)
