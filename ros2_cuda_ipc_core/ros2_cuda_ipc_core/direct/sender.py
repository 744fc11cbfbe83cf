"""``DirectSender``: what a typed publisher writes to its direct subscribers for each publication on one topic.

Per publication one frame record (struct-packed: block, uid, size, stamp, ready event, frame_id), written to
each channel of the topic before the message goes to DDS, so the direct path leads.  The template (the whole
message as CDR) is serialized only when what frames do not carry changes (the layout) and a channel lacks
it.  With no direct subscriber a publication costs one dictionary lookup.
"""

from __future__ import annotations

import threading
from typing import Any

from .channels import DirectChannels
from .wire import frame_record, template_record

_NOTHING = object()  # no layout sent yet


class DirectSender:
    def __init__(self, channels: DirectChannels, topic: str) -> None:
        self._channels = channels
        self._topic = topic
        self._lock = threading.Lock()  # publishes from several threads share the template state
        self._template_id = 0
        self._layout: Any = _NOTHING
        self._template: bytes | None = None
        self._handles: dict[int, tuple[Any, bytes]] = {}  # block -> (its ready event's handle array, as bytes)

    def send(self, msg: Any, layout: Any) -> None:
        """Write ``msg``'s publication (``layout`` is what its fields were filled from) to the topic's channels."""
        channels = self._channels.for_topic(self._topic)
        if not channels:
            return
        core, header = msg.core, msg.header
        with self._lock:
            if layout is not self._layout and layout != self._layout:
                self._layout = layout
                self._template_id += 1
                self._template = None
            template_id = self._template_id
            block = core.block_id
            handle = core.event_handle  # one array per block, the pool's: converted to bytes once
            known = self._handles.get(block)
            if known is None or known[0] is not handle:
                known = self._handles[block] = (handle, bytes(handle))
            record = frame_record(template_id, block, core.uid, core.byte_size, header.stamp.sec, header.stamp.nanosec,
                                  known[1], header.frame_id.encode())

            def template() -> bytes:
                if self._template is None:
                    from rclpy.serialization import serialize_message

                    self._template = template_record(template_id, serialize_message(msg))
                return self._template

            self._channels.send(channels, template_id, template, record)
