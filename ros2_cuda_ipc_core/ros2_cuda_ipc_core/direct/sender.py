"""``DirectSender``: what a typed publisher writes to its direct subscribers for each publication on one topic.

Per publication one frame record (struct-packed: block, uid, size, stamp, ready event), written to each
channel of the topic before the message goes to DDS, so the direct path leads.  The template (the whole
message as CDR) is serialized only when what frames do not carry changes (the layout, the ``frame_id``)
and a channel lacks it.  With no direct subscriber a publication costs one dictionary lookup.
"""

from __future__ import annotations

import threading
from typing import Any

from .channels import DirectChannels
from .wire import frame_record, template_record


class DirectSender:
    def __init__(self, channels: DirectChannels, topic: str) -> None:
        self._channels = channels
        self._topic = topic
        self._lock = threading.Lock()  # publishes from several threads share the template state
        self._template_id = 0
        self._layout: Any = None
        self._frame_id: str | None = None
        self._template: bytes | None = None

    def send(self, msg: Any, layout: Any) -> None:
        """Write ``msg``'s publication (``layout`` is what its fields were filled from) to the topic's channels."""
        channels = self._channels.for_topic(self._topic)
        if not channels:
            return
        core, header = msg.core, msg.header
        with self._lock:
            frame_id = header.frame_id
            if (layout is not self._layout and layout != self._layout) or frame_id != self._frame_id:
                self._layout, self._frame_id = layout, frame_id
                self._template_id += 1
                self._template = None
            template_id = self._template_id
            record = frame_record(template_id, core.block_id, core.uid, core.byte_size, header.stamp.sec,
                                  header.stamp.nanosec, bytes(core.event_handle))

            def template() -> bytes:
                if self._template is None:
                    from rclpy.serialization import serialize_message

                    self._template = template_record(template_id, serialize_message(msg))
                return self._template

            self._channels.send(channels, template_id, template, record)
