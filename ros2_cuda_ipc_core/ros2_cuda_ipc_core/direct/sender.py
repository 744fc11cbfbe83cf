"""``DirectSender``: what a typed publisher writes to its direct subscribers for each publication on one topic.

Per publication one frame record (struct-packed: block, uid, size, stamp, ready event, frame_id), written to
each channel of the topic before the message goes to DDS, so the direct path leads.  The template (the whole
message as CDR) is serialized only when what frames do not carry changes (the layout) and a channel exists.
With no direct subscriber a publication costs one dictionary lookup.

A subscriber must never make a publish fail: a publication a record cannot carry (a long ``frame_id``, a
template over the limit) and anything else that goes wrong here only skips the direct path for it
(``direct_skipped``, said once at WARNING); the message still goes to DDS.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..throttle import Throttle
from .channels import DirectChannels
from .wire import MAX_TEMPLATE_BYTES, fits, frame_record, template_record

log = logging.getLogger("ros2_cuda_ipc")

_NOTHING = object()  # no layout sent yet


class DirectSender:
    def __init__(self, channels: DirectChannels, topic: str) -> None:
        self._channels = channels
        self._topic = topic
        self._lock = threading.Lock()  # publishes from several threads share the template state
        self._template_id = 0
        self._layout: Any = _NOTHING
        self._template: bytes | None = None  # this layout's template record; b"" when it cannot be one
        self._cdr_bytes = 0  # the size of this layout's message, as CDR
        self._handles: dict[int, tuple[Any, bytes]] = {}  # block -> (its ready event's handle array, as bytes)
        self._once = Throttle(float("inf"))

    def send(self, msg: Any, layout: Any) -> None:
        """Write ``msg``'s publication (``layout`` is what its fields were filled from) to the topic's channels;
        never raises."""
        if not self._channels.has(self._topic):
            self._channels.stalled_drops(self._topic)
            return
        try:
            with self._lock:
                self._send(msg, layout)
        except Exception as exc:  # a bug or a message this path cannot take: DDS carries it all the same
            self._skip("error", f"{type(exc).__name__}: {exc}")

    def _send(self, msg: Any, layout: Any) -> None:
        core, header = msg.core, msg.header
        if layout is not self._layout and layout != self._layout:
            self._layout = layout
            self._template_id += 1
            self._template = None
        template_id = self._template_id
        frame_id = header.frame_id.encode()
        why = fits(frame_id)
        if why is not None:
            self._skip("frame_id", why)
            return
        if self._template is None:  # once per layout: whether this layout's messages fit a template at all
            from rclpy.serialization import serialize_message

            cdr = serialize_message(msg)
            self._cdr_bytes = len(cdr)
            self._template = template_record(template_id, cdr) if len(cdr) <= MAX_TEMPLATE_BYTES else b""
        if not self._template:
            self._skip("template", str(fits(b"", self._cdr_bytes)))
            return
        block = core.block_id
        handle = core.event_handle  # one array per block, the pool's: converted to bytes once
        known = self._handles.get(block)
        if known is None or known[0] is not handle:
            known = self._handles[block] = (handle, bytes(handle))
        record = frame_record(template_id, block, core.uid, core.byte_size, header.stamp.sec, header.stamp.nanosec,
                              known[1], frame_id)
        self._channels.send(self._topic, template_id, self._template, record)

    def _skip(self, key: str, why: str) -> None:
        self._channels.skipped()
        if self._once.ready(key):
            log.warning("%s: a publication went by DDS alone, not to its direct subscribers: %s (said once per "
                        "reason; counted in the pool's stats()['direct_skipped'])", self._topic, why)
