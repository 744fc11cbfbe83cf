"""``LayoutCache``: the checked layouts of the clouds a reader has seen, so a stream of one layout is parsed once.

Parsing and checking a cloud's PointFields costs more than leasing its block; a LiDAR stream sends the
same fields with every message.  The cache keys on the message's metadata exactly as sent, so any change
is a new entry, checked in full; only the byte_size check (one comparison) runs for every message.
"""

from __future__ import annotations

from typing import Any

from .fields import CloudField
from .layout import CloudLayout

_Key = tuple[Any, ...]


class LayoutCache:
    """Checked layouts by metadata, and checked fields by point, each at most ``capacity`` entries.

    Safe to share between threads: entries are immutable, and a dict get or set is atomic.
    """

    def __init__(self, capacity: int = 32) -> None:
        self.capacity = capacity
        self._layouts: dict[_Key, CloudLayout] = {}
        self._points: dict[_Key, tuple[CloudField, ...]] = {}

    def layout_of(self, msg: Any, byte_size: int) -> CloudLayout:
        """The layout ``msg`` states, checked against ``byte_size`` (InvalidDescriptorError naming what is wrong)."""
        point = (msg.point_step, bool(msg.is_bigendian), tuple([(f.name, f.offset, f.datatype, f.count)
                                                                for f in msg.fields]))
        key = (msg.height, msg.width, msg.row_step, bool(msg.is_dense), point)
        layout = self._layouts.get(key)
        if layout is None:
            fields = self._points.get(point)
            if fields is None:  # a point never seen: parse and check it all
                layout = CloudLayout.from_message(msg).validate_points()
                self._remember(self._points, point, layout.fields)
            else:  # known point, new size (unorganized clouds vary): the point is already checked
                layout = CloudLayout(msg.height, msg.width, msg.point_step, msg.row_step, fields, point[1], key[3])
            layout.validate_size(byte_size)
            self._remember(self._layouts, key, layout)
            return layout
        return layout.validate_size(byte_size)

    def _remember(self, entries: dict[_Key, Any], key: _Key, value: Any) -> None:
        if len(entries) >= self.capacity:
            entries.pop(next(iter(entries)), None)  # the oldest entry
        entries[key] = value
