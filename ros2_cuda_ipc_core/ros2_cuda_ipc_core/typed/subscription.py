"""``TypedSubscription``: every frame of a typed topic, zero-copy where the pool can be mapped, else through its twin.

Per publisher pool *instance* (pool id, socket, publisher pid: a pool id alone is public and names nothing),
a descriptor that reached the pool decides the path, in :meth:`TypedSubscription._route`: a pool this
process can map is read zero-copy; one it cannot for reasons of place (:class:`PoolUnavailableError`: other
host, other network or pid namespace, refused uid; :class:`CudaUnavailableError`: no CUDA here) is read
through its CPU twin (``fallback="auto"``, one log line naming the publisher and the reason) or refused
(``fallback="never"``, one error line), and tried again every ``REDECIDE_AFTER`` seconds.  A descriptor that
fails on its own claims (:class:`InvalidDescriptorError`, :class:`PoolIdentityError`) is dropped and
counted and decides nothing; a forged descriptor can only ever decide the route of the instance it names.

A twin message is matched to its descriptor by header (stamp and frame_id).  Each frame is delivered once
and in order: per instance, a publication whose uid is not above the last one delivered (a second
descriptor of it, its twin, or its copy over the other path) is dropped.

``delivery="direct"`` (DESIGN §14) also takes each publication of a pool it reads zero-copy on a connection
to that pool (:mod:`..direct`), and runs the callback on the subscription's own delivery thread, for frames
from every path: whichever path brings a frame first delivers it, the other copy is dropped.  Its DDS messages
are taken on that thread too, from a reader no executor waits on (:mod:`..direct.dds_leg`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Literal, TypeVar

from ..direct.dds_leg import DdsLeg
from ..direct.frames import DirectMessage, HeaderSpares, TemplateMessage
from ..direct.receiver import DirectReceiver
from ..direct.wire import Frame
from ..errors import CudaUnavailableError, InvalidDescriptorError, PoolUnavailableError, Ros2CudaIpcError, StaleDescriptorError
from ..memory.streams import StreamLike
from ..node.topic_check import check_topic
from ..pool.block_manager import MemoryKind
from ..pool.descriptor import Descriptor, InstanceKey
from .checks import require_cuda_for
from .peek import Templates, peek_message
from .reader import TypedReader
from .twins import twin_topic
from .upload import TwinUpload

V = TypeVar("V")
FallbackMode = Literal["auto", "never"]
DeliveryMode = Literal["executor", "direct"]
FrameKey = tuple[InstanceKey, int, int]  #: (instance, block_id, uid): one publication of one block
HeaderKey = tuple[int, int, str]  #: (stamp.sec, stamp.nanosec, frame_id): what a twin shares with its descriptor

log = logging.getLogger("ros2_cuda_ipc")

__all__ = ["DeliveryMode", "FallbackMode", "Route", "TypedSubscription"]

#: Instances remembered (routes, last uids), and twins / descriptors waiting for their other half.
_REMEMBERED = 256
_WAITING = 8
#: Seconds after which a publisher read through its twin (or refused) is tried zero-copy again.
REDECIDE_AFTER = 5.0


@dataclass(frozen=True)
class Route:
    """How one publisher's frames come: ``path`` is "zero_copy", "fallback" or "refused"; ``reason`` says why not
    zero-copy; ``decided`` is when (``time.monotonic()``)."""

    path: str
    reason: str = ""
    publisher: str = ""
    decided: float = 0.0


_ZERO_COPY = Route("zero_copy")


def _instance(core: Any) -> InstanceKey:
    return bytes(core.pool_id), str(core.socket_path), int(core.publisher_pid)


class TypedSubscription(Generic[V]):
    """Calls ``callback(view)`` once per frame of ``topic``, with the typed package's view whichever way it came.

    ``reader`` reads descriptors, ``upload`` turns twin messages into local views (None for a type without CPU
    twins: a publisher that cannot be read zero-copy is then refused, saying so); ``memory`` is where fallback
    frames land ("auto": CUDA when the publisher's frames are CUDA and CUDA is usable here, else host; "host";
    "cuda").  ``stream`` orders zero-copy reads and CUDA uploads.  The twin topic is :func:`twin_topic` of the
    resolved topic unless ``fallback_topic`` names it (as the publisher's ``fallback_topic`` did).

    ``delivery="executor"`` (the default) runs ``callback`` in the node's executor, like any subscription.
    ``delivery="direct"`` runs it on this subscription's own thread, as soon as a publication arrives on the
    pool's connection, outside the executor and its callback groups: ``callback`` must then be thread-safe
    (see the core README, "Direct delivery").
    """

    def __init__(self, node: Any, topic: str, message_type: type, reader: TypedReader[Any, Any, V],
                 upload: TwinUpload[Any] | None, callback: Callable[[V], None], qos: Any = 10, *,
                 fallback: FallbackMode = "auto", memory: MemoryKind = "auto", stream: StreamLike = None,
                 fallback_topic: str | None = None, delivery: DeliveryMode = "executor") -> None:
        if fallback not in ("auto", "never"):
            raise ValueError(f"fallback={fallback!r}: give 'auto' (read a twin when zero-copy cannot work) or 'never'")
        if memory not in ("auto", "host", "cuda"):
            raise ValueError(f"memory={memory!r}: give 'auto', 'host' or 'cuda'")
        require_cuda_for(memory)  # where a fallback frame would land: said at once, as a publisher says it
        if delivery not in ("executor", "direct"):
            raise ValueError(f"delivery={delivery!r}: give 'executor' (the callback runs in the node's executor) or "
                             "'direct' (on the subscription's own thread, as soon as a frame arrives)")
        self.fallback = fallback
        self.memory = memory
        self.stream = stream
        self.reader = reader
        self.delivery = delivery
        self._node = node
        self._message_type = message_type
        self._upload = upload
        self._callback = callback
        self._qos = qos
        self._lock = threading.RLock()  # routes and the tables below, for multi-threaded executors
        self._upload_lock = threading.Lock()  # the local fallback publishers
        self._routes: OrderedDict[InstanceKey, Route] = OrderedDict()
        self._last_uid: OrderedDict[InstanceKey, int] = OrderedDict()
        self._logged: set[tuple[str, str]] = set()
        self._waiting_twins: OrderedDict[HeaderKey, Any] = OrderedDict()
        self._waiting_frames: OrderedDict[HeaderKey, tuple[FrameKey, int]] = OrderedDict()
        self._frames: Counter[str] = Counter()
        self._arrived: Counter[str] = Counter()
        self._by_reason: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        self._direct_layouts: dict[tuple[InstanceKey, int, int], Any] = {}
        self._headers: HeaderSpares | None = None
        # DDS messages come serialized: one that repeats a template's layout is read without deserializing it, and
        # with direct delivery most are duplicates, dropped after a peek (.peek).
        self._templates = Templates(reader.layout_of)
        self._deserialized = 0  # DDS messages that matched no template
        self._dds_headers = HeaderSpares()
        self._subscription: Any = None
        self._dds_leg: DdsLeg | None = None
        self._receiver: DirectReceiver | None = None
        if delivery == "direct":  # every path's frames on the delivery thread, DDS's taken there too (dds_leg.py)
            from rclpy.serialization import deserialize_message

            self._headers = HeaderSpares()
            self._receiver = DirectReceiver(f"ros2_cuda_ipc direct {node.resolve_topic_name(topic)}",
                                            self._on_direct_frame,
                                            partial(deserialize_message, message_type=message_type),
                                            reader.reader.allowed_uids, reader.reader.check_publisher_pid)
            self._dds_leg = DdsLeg(node, message_type, topic, qos, self._on_serialized, self._receiver.submit)
            self.topic = self._dds_leg.topic_name
        else:
            self._subscription = node.create_subscription(message_type, topic, self._on_serialized, qos, raw=True)
            self.topic = str(self._subscription.topic_name)
        self._topic_check = check_topic(node, topic, message_type)  # a misspelt topic, or one of another type, is said
        self.twin_topic = fallback_topic or twin_topic(self.topic)
        self._twin_subscription: Any = None

    # -- the one place that decides which way a publisher's frames come --------------------------------------

    def _route(self, msg: Any, instance: InstanceKey, layout: Any) -> tuple[Route, V | None]:
        """This publisher's route, decided by a descriptor that reached its pool, and the zero-copy view when that
        read worked."""
        route = self._routes.get(instance)
        if route is not None and route.path != "zero_copy" and time.monotonic() - route.decided < REDECIDE_AFTER:
            return route, None
        try:
            view = self.reader.read(msg, self.stream, layout=layout)
        except StaleDescriptorError:  # the pool was reached: its frames come zero-copy, this one moved on
            if route is None or route.path != "zero_copy":
                self._zero_copy(instance, msg)
            raise
        except (PoolUnavailableError, CudaUnavailableError) as exc:
            if route is not None and route.path == "zero_copy":  # mapped before: the publisher went away
                raise
            publisher = f"pid {instance[2]}, {instance[1]!r}"
            reason = route.reason if route is not None else str(exc)  # a retry that failed again: the first reason
            if self._upload is None and route is None:
                reason += f" ({self._message_type.__name__} has no CPU twin to fall back to)"
            path = "fallback" if self.fallback == "auto" and self._upload is not None else "refused"
            route = Route(path, reason, publisher, time.monotonic())
            _put_bounded(self._routes, instance, route)
            self._say_once(route)
            return route, None
        if route is None or route.path != "zero_copy":
            self._zero_copy(instance, msg)
        elif self._receiver is not None and type(msg) is not DirectMessage and self._receiver.wants_channel(instance):
            self._zero_copy(instance, msg)  # its direct channel failed to open: tried again, backed off
        return _ZERO_COPY, view

    def _zero_copy(self, instance: InstanceKey, msg: Any) -> None:
        """Remember that ``instance`` is read zero-copy; with direct delivery, open its channel (once)."""
        _put_bounded(self._routes, instance, _ZERO_COPY)
        if self._receiver is not None and type(msg) is not DirectMessage:
            with contextlib.suppress(InvalidDescriptorError):  # it was read a moment ago: a malformed one cannot be here
                self._receiver.connect(Descriptor.from_message(msg.core), self.topic)

    def _say_once(self, route: Route) -> None:
        key = (route.publisher, route.reason)
        if key in self._logged:
            return
        self._logged.add(key)
        if route.path == "fallback":
            log.warning("%s: the publisher (%s) cannot be read zero-copy (%s); reading its CPU twin %s",
                        self.topic, route.publisher, route.reason, self.twin_topic)
        else:
            log.error("%s: refusing the publisher (%s): it cannot be read zero-copy (%s) and fallback='never'",
                      self.topic, route.publisher, route.reason)

    # -- descriptors and twins ------------------------------------------------------------------------------

    def _on_descriptor(self, msg: Any, layout: Any = None) -> None:
        """A descriptor from DDS, on the thread that took it (the executor's; the delivery thread when direct);
        ``layout``: its checked layout, where a template gave it."""
        self._topic_check.cancel()
        self._arrived["dds"] += 1
        self._handle_descriptor(msg, layout)

    def _on_serialized(self, data: bytes) -> None:
        """A serialized message from DDS (the executor's thread; the delivery thread when direct): one that repeats
        a template's layout is that template with its header and core, and a copy of a frame the direct path
        delivered already costs a peek; anything else is deserialized."""
        peeked = peek_message(data, self._message_type)
        if peeked is not None:
            core = peeked.core
            if self._receiver is not None and core.uid <= self._last_uid.get(core.instance, 0):
                self._topic_check.cancel()
                self._arrived["dds"] += 1
                self._dropped["duplicate"] += 1
                return
            known = self._templates.get(peeked.template_key)
            if known is not None:
                template, layout = known
                header = self._dds_headers.take(peeked.sec, peeked.nanosec, peeked.frame_id)
                self._on_descriptor(TemplateMessage(header, core, template), layout)
                self._dds_headers.refill()  # the next frame's header, made now, while nothing waits
                return
        from rclpy.serialization import deserialize_message

        self._deserialized += 1
        try:
            msg: Any = deserialize_message(data, self._message_type)
        except Exception:  # rclpy raises a bare RuntimeError for bytes it cannot read
            self._arrived["dds"] += 1
            self._dropped["invalid"] += 1
            return
        layout = None if peeked is None else self._templates.learn(peeked, msg)
        self._on_descriptor(msg, layout)

    def _on_direct_frame(self, instance: InstanceKey, template: Any, frame: Frame) -> bool:
        """A publication from the pool's direct channel (the delivery thread): ``template``'s fields, ``frame``'s core.
        False when it named nothing readable (the receiver ends a channel of nothing else)."""
        self._arrived["direct"] += 1
        assert self._headers is not None
        key = (instance, frame.template_id, frame.byte_size)
        known = self._direct_layouts.get(key)
        if known is None:  # once per template and block size: the checks are the same for every frame
            try:
                pool = Descriptor.from_message(template.core)  # its memory and device fields, checked
                core = Descriptor(instance[1], instance[0], frame.block_id, frame.uid, instance[2], pool.memory,
                                  pool.device_id, frame.event_handle, frame.byte_size)
                layout = self.reader.layout_of(DirectMessage(template.header, core, template))
            except InvalidDescriptorError:
                self._dropped["invalid"] += 1
                return False
            if len(self._direct_layouts) >= _REMEMBERED:
                self._direct_layouts.clear()
            known = self._direct_layouts[key] = (layout, pool.memory, pool.device_id)
        layout, memory, device = known
        # Every field is bounded already: the instance is the channel's, the rest by the record's struct.
        core = Descriptor(instance[1], instance[0], frame.block_id, frame.uid, instance[2], memory, device,
                          frame.event_handle, frame.byte_size)
        msg = DirectMessage(self._headers.take(frame.sec, frame.nanosec, frame.frame_id), core, template)
        unreadable = self._dropped["stale"] + self._dropped["invalid"]
        self._handle_descriptor(msg, layout)  # on this thread alone, as every descriptor of a direct subscription
        self._headers.refill()  # the next frame's header, made now, while nothing waits
        return self._dropped["stale"] + self._dropped["invalid"] == unreadable

    def _handle_descriptor(self, msg: Any, layout: Any = None) -> None:
        core = msg.core
        instance = _instance(core)
        key = (instance, int(core.block_id), int(core.uid))
        with self._lock:
            if key[2] <= self._last_uid.get(instance, 0):
                self._dropped["duplicate"] += 1
                return
            try:
                route, view = self._route(msg, instance, layout)
            except StaleDescriptorError:
                self._dropped["stale"] += 1
                return
            except InvalidDescriptorError:  # the descriptor's own claims (PoolIdentityError too): decides nothing
                self._dropped["invalid"] += 1
                return
            except Ros2CudaIpcError as exc:
                self._dropped["unreadable"] += 1
                log.warning("%s: frame dropped: %s", self.topic, exc)
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
                    _put_bounded(self._waiting_frames, header, (key, int(core.memory)), self._dropped,
                                 "twin_missing")
                    return
        if view is not None:
            self._deliver(key, view, route)
        else:
            self._deliver_twin(key, int(core.memory), twin, route)

    def _on_twin(self, twin: Any) -> None:
        if self._receiver is None:
            self._handle_twin(twin)
        else:
            self._receiver.submit(partial(self._handle_twin, twin))

    def _handle_twin(self, twin: Any) -> None:
        header = _header_key(twin.header)
        with self._lock:
            waiting = self._waiting_frames.pop(header, None)
            if waiting is None:
                _put_bounded(self._waiting_twins, header, twin, self._dropped, "twin_unmatched")
                return
            key, memory = waiting
            route = self._routes.get(key[0], Route("fallback"))
        self._arrived["twin"] += 1
        self._deliver_twin(key, memory, twin, route)

    def _deliver_twin(self, key: FrameKey, descriptor_memory: int, twin: Any, route: Route) -> None:
        memory: MemoryKind = self.memory
        if memory == "auto":
            memory = "cuda" if descriptor_memory == 1 and _cuda_usable() else "host"
        assert self._upload is not None  # a twin comes only where a fallback route subscribed to it
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
        """Hand ``view`` to the callback unless its frame (or a later one of its publisher) was delivered already:
        the view is then closed."""
        instance, _block, uid = key
        with self._lock:
            duplicate = uid <= self._last_uid.get(instance, 0)
            if not duplicate:
                _put_bounded(self._last_uid, instance, uid)
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
        if self._twin_subscription is None and self._upload is not None:
            self._twin_subscription = self._node.create_subscription(self._upload.message_type, self.twin_topic,
                                                                     self._on_twin, self._qos)

    # -- what it did ---------------------------------------------------------------------------------------

    @property
    def message_type(self) -> type:
        """The descriptor message it subscribes to on DDS (``GpuImage``, ``GpuTensor``, ...)."""
        return self._message_type

    def routes(self) -> dict[str, Route]:
        """Each publisher's route so far, by pool id (hex) and, where two instances claim one id, its socket."""
        with self._lock:
            routes = list(self._routes.items())
        ids = Counter(instance[0] for instance, _ in routes)
        return {(instance[0].hex() if ids[instance[0]] == 1 else f"{instance[0].hex()} {instance[1]}"): route
                for instance, route in routes}

    def stats(self) -> dict[str, Any]:
        """Frames by path ("zero_copy", "fallback", "refused"), fallback and refused frames by reason, drops by
        cause ("stale", "invalid", "twin_missing", "twin_unmatched", "no_free_block", "duplicate", ...), and what
        arrived by way ("dds", "direct", "twin"; the direct delivery thread's counters under "direct"), and the
        publishers (pool instances) seen by route ("routes"), and how many DDS messages were deserialized
        ("dds_deserialized": those whose layout fields matched no template, the first of each layout and pool)."""
        with self._lock:
            stats = {"frames": {path: self._frames[path] for path in ("zero_copy", "fallback", "refused")},
                     "routes": dict(Counter(route.path for route in self._routes.values())),
                     "by_reason": dict(self._by_reason), "dropped": dict(self._dropped),
                     "arrived": dict(self._arrived), "twin_subscribed": self._twin_subscription is not None,
                     "delivery": self.delivery, "dds_deserialized": self._deserialized}
        if self._receiver is not None:
            stats["direct"] = self._receiver.stats()
        return stats

    def close(self) -> None:
        """Stop delivering, withdraw both subscriptions and the local fallback blocks (views still held keep theirs)."""
        self._topic_check.cancel()
        if self._dds_leg is not None:  # first: no drain is handed to a receiver that closed
            self._dds_leg.close()
        else:
            self._node.destroy_subscription(self._subscription)
        if self._receiver is not None:
            self._receiver.close()
        if self._twin_subscription is not None:
            self._node.destroy_subscription(self._twin_subscription)
            self._twin_subscription = None
        if self._upload is not None:
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
    from ..memory.cuda_driver import unavailable_reason

    return unavailable_reason() is None
