"""``TypedSubscription``: every frame of a typed topic, zero-copy where the pool can be mapped, else through its twin.

Per publisher (per pool), the first descriptor decides the path, in :meth:`TypedSubscription._route`:
a pool this process can map is read zero-copy; one it cannot for reasons of place
(:class:`PoolUnavailableError`: other host, other network namespace, refused uid;
:class:`CudaUnavailableError`: no CUDA here) is read through its CPU twin (``fallback="auto"``, one log
line naming the publisher and the reason) or refused (``fallback="never"``, one error line).

A twin message is matched to its descriptor by header (stamp and frame_id), and each frame is delivered
once, keyed on its descriptor's (pool_id, block_id, uid), whichever path brought it: a twin seen for a
frame already delivered, or a second descriptor of it, is not delivered again.  DDS carries every
descriptor; a faster same-host path adds a route in ``_route`` and delivers through ``_deliver``.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from ..errors import CudaUnavailableError, InvalidDescriptorError, PoolUnavailableError, Ros2CudaIpcError, StaleDescriptorError
from ..pool import MemoryKind
from ..streams import StreamLike
from .reader import TypedReader
from .twins import twin_topic
from .upload import TwinUpload

V = TypeVar("V")
FallbackMode = Literal["auto", "never"]
FrameKey = tuple[bytes, int, int]  #: (pool_id, block_id, uid): one publication of one block
HeaderKey = tuple[int, int, str]  #: (stamp.sec, stamp.nanosec, frame_id): what a twin shares with its descriptor

log = logging.getLogger("ros2_cuda_ipc")

__all__ = ["FallbackMode", "Route", "TypedSubscription"]

#: Frames remembered for exactly-once delivery, and twins / descriptors waiting for their other half.
_REMEMBERED = 256
_WAITING = 8


@dataclass(frozen=True)
class Route:
    """How one publisher's frames come: ``path`` is "zero_copy", "fallback" or "refused"; ``reason`` says why not zero-copy."""

    path: str
    reason: str = ""
    publisher: str = ""


_ZERO_COPY = Route("zero_copy")


class TypedSubscription(Generic[V]):
    """Calls ``callback(view)`` once per frame of ``topic``, with the typed package's view whichever way it came.

    ``reader`` reads descriptors, ``upload`` turns twin messages into local views; ``memory`` is where fallback
    frames land ("auto": CUDA when the publisher's frames are CUDA and CUDA is usable here, else host; "host";
    "cuda").  ``stream`` orders zero-copy reads and CUDA uploads.  The twin topic is :func:`twin_topic` of the
    resolved topic unless ``fallback_topic`` names it (as the publisher's ``fallback_topic`` did).
    """

    def __init__(self, node: Any, topic: str, message_type: type, reader: TypedReader[Any, Any, V],
                 upload: TwinUpload[Any], callback: Callable[[V], None], qos: Any = 10, *,
                 fallback: FallbackMode = "auto", memory: MemoryKind = "auto", stream: StreamLike = None,
                 fallback_topic: str | None = None) -> None:
        if fallback not in ("auto", "never"):
            raise ValueError(f"fallback={fallback!r}: give 'auto' (read a twin when zero-copy cannot work) or 'never'")
        if memory not in ("auto", "host", "cuda"):
            raise ValueError(f"memory={memory!r}: give 'auto', 'host' or 'cuda'")
        self.fallback = fallback
        self.memory = memory
        self.stream = stream
        self.reader = reader
        self._node = node
        self._upload = upload
        self._callback = callback
        self._qos = qos
        self._lock = threading.RLock()  # routes and the tables below, for multi-threaded executors
        self._upload_lock = threading.Lock()  # the local fallback publishers
        self._routes: OrderedDict[bytes, Route] = OrderedDict()  # the last 256 pools seen
        self._logged: set[tuple[str, str]] = set()
        self._delivered: OrderedDict[FrameKey, None] = OrderedDict()
        self._waiting_twins: OrderedDict[HeaderKey, Any] = OrderedDict()
        self._waiting_frames: OrderedDict[HeaderKey, tuple[FrameKey, int]] = OrderedDict()
        self._frames: Counter[str] = Counter()
        self._by_reason: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        self._subscription = node.create_subscription(message_type, topic, self._on_descriptor, qos)
        self.twin_topic = fallback_topic or twin_topic(str(self._subscription.topic_name))
        self._twin_subscription: Any = None

    # -- the one place that decides which way a publisher's frames come --------------------------------------

    def _route(self, msg: Any) -> tuple[Route, V | None]:
        """This publisher's route, decided by its first descriptor, and the zero-copy view when that read worked."""
        pool_id = bytes(msg.core.pool_id)
        route = self._routes.get(pool_id)
        if route is not None and route.path != "zero_copy":
            return route, None
        try:
            view = self.reader.read(msg, self.stream)
        except StaleDescriptorError:  # the pool was reached: its frames come zero-copy, this one moved on
            if route is None:
                _put_bounded(self._routes, pool_id, _ZERO_COPY)
            raise
        except (PoolUnavailableError, CudaUnavailableError) as exc:
            if route is not None:  # mapped before: the publisher went away, which says nothing about place
                raise
            publisher = f"pid {int(msg.core.publisher_pid)}, {msg.core.socket_path!r}"
            route = Route("fallback" if self.fallback == "auto" else "refused", str(exc), publisher)
            _put_bounded(self._routes, pool_id, route)
            self._say_once(route)
            return route, None
        if route is None:
            _put_bounded(self._routes, pool_id, _ZERO_COPY)
        return _ZERO_COPY, view

    def _say_once(self, route: Route) -> None:
        key = (route.publisher, route.reason)
        if key in self._logged:
            return
        self._logged.add(key)
        if route.path == "fallback":
            log.warning("%s: the publisher (%s) cannot be read zero-copy (%s); reading its CPU twin %s",
                        self._subscription.topic_name, route.publisher, route.reason, self.twin_topic)
        else:
            log.error("%s: refusing the publisher (%s): it cannot be read zero-copy (%s) and fallback='never'",
                      self._subscription.topic_name, route.publisher, route.reason)

    # -- descriptors and twins ------------------------------------------------------------------------------

    def _on_descriptor(self, msg: Any) -> None:
        key = (bytes(msg.core.pool_id), int(msg.core.block_id), int(msg.core.uid))
        with self._lock:
            if key in self._delivered:
                self._dropped["duplicate"] += 1
                return
            try:
                route, view = self._route(msg)
            except StaleDescriptorError:
                self._dropped["stale"] += 1
                return
            except InvalidDescriptorError:
                self._dropped["invalid"] += 1
                return
            except Ros2CudaIpcError as exc:
                self._dropped["unreadable"] += 1
                log.warning("%s: frame dropped: %s", self._subscription.topic_name, exc)
                return
            twin = None
            if view is None and route.path == "refused":
                self._frames["refused"] += 1
                self._by_reason[route.reason] += 1
                return
            if view is None:
                self._ensure_twin_subscription()
                header = _header_key(msg.header)
                twin = self._waiting_twins.pop(header, None)
                if twin is None:
                    _put_bounded(self._waiting_frames, header, (key, int(msg.core.memory)), self._dropped,
                                 "twin_missing")
                    return
        if view is not None:
            self._deliver(key, view, route)
        else:
            self._deliver_twin(key, int(msg.core.memory), twin, route)

    def _on_twin(self, twin: Any) -> None:
        header = _header_key(twin.header)
        with self._lock:
            waiting = self._waiting_frames.pop(header, None)
            if waiting is None:
                _put_bounded(self._waiting_twins, header, twin, self._dropped, "twin_unmatched")
                return
            key, memory = waiting
            route = self._routes.get(key[0], Route("fallback"))
        self._deliver_twin(key, memory, twin, route)

    def _deliver_twin(self, key: FrameKey, descriptor_memory: int, twin: Any, route: Route) -> None:
        memory: MemoryKind = self.memory
        if memory == "auto":
            memory = "cuda" if descriptor_memory == 1 and _cuda_usable() else "host"
        try:
            with self._upload_lock:
                local = self._upload.local_message(twin, memory)
                view = None if local is None else self.reader.read(local, self.stream)
            if view is None:
                self._dropped["no_free_block"] += 1
                return
        except (Ros2CudaIpcError, ValueError) as exc:
            self._dropped["bad_twin"] += 1
            if self._dropped["bad_twin"] in (1, 10, 100) or self._dropped["bad_twin"] % 1000 == 0:  # a flood stays quiet
                log.warning("%s: a twin frame could not be used (%d so far): %s", self.twin_topic,
                            self._dropped["bad_twin"], exc)
            return
        self._deliver(key, view, route)

    def _deliver(self, key: FrameKey, view: V, route: Route) -> None:
        """Hand ``view`` to the callback unless its frame was delivered already (the view is then closed)."""
        with self._lock:
            duplicate = key in self._delivered
            if not duplicate:
                _put_bounded(self._delivered, key, None)
                self._frames[route.path] += 1
                if route.reason:
                    self._by_reason[route.reason] += 1
            else:
                self._dropped["duplicate"] += 1
        if duplicate:
            getattr(view, "close", lambda: None)()
            return
        self._callback(view)

    def _ensure_twin_subscription(self) -> None:
        if self._twin_subscription is None:
            self._twin_subscription = self._node.create_subscription(self._upload.message_type, self.twin_topic,
                                                                     self._on_twin, self._qos)

    # -- what it did ---------------------------------------------------------------------------------------

    def routes(self) -> dict[str, Route]:
        """Each publisher's route so far, by pool id (hex)."""
        with self._lock:
            return {pool_id.hex(): route for pool_id, route in self._routes.items()}

    def stats(self) -> dict[str, Any]:
        """Frames by path ("zero_copy", "fallback", "refused"), fallback and refused frames by reason, and drops
        by cause ("stale", "invalid", "twin_missing", "twin_unmatched", "no_free_block", "duplicate", ...)."""
        with self._lock:
            return {"frames": {path: self._frames[path] for path in ("zero_copy", "fallback", "refused")},
                    "by_reason": dict(self._by_reason), "dropped": dict(self._dropped),
                    "twin_subscribed": self._twin_subscription is not None}

    def close(self) -> None:
        """Withdraw both subscriptions and the local fallback blocks (views still held keep theirs)."""
        self._node.destroy_subscription(self._subscription)
        if self._twin_subscription is not None:
            self._node.destroy_subscription(self._twin_subscription)
            self._twin_subscription = None
        self._upload.close()

    def __enter__(self) -> TypedSubscription[V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _header_key(header: Any) -> HeaderKey:
    return int(header.stamp.sec), int(header.stamp.nanosec), str(header.frame_id)


def _put_bounded(table: OrderedDict[Any, Any], key: Any, value: Any, dropped: Counter[str] | None = None,
                 cause: str = "") -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > (_WAITING if dropped is not None else _REMEMBERED):
        table.popitem(last=False)
        if dropped is not None:
            dropped[cause] += 1


def _cuda_usable() -> bool:
    from ..cuda_driver import unavailable_reason

    return unavailable_reason() is None
