"""Test support (not shipped): how soon a typed publisher may publish a block again, checked the same way for each.

Every typed publisher (the core ``TypedPublisher``, ``ImagePublisher``, ``PointCloudPublisher``) takes
``reuse_delay``; their tests share the values it must refuse and the check that 0 really means "as soon
as the readers let go".
"""

from __future__ import annotations

import math
from typing import Any

#: Values every typed publisher (and every node or tool that takes ``reuse_delay``) must refuse by name.
BAD_REUSE_DELAYS = [-1.0, -1e-9, math.nan, math.inf, -math.inf]


def republish_once_released(publisher: Any, reader: Any) -> None:
    """``publisher`` has one block and ``reuse_delay=0``: publish it, read it; while the read lasts no block is
    free, and the moment it ends the same block can be borrowed and published again."""
    assert publisher.pool.block_count == 1 and publisher.pool.reuse_delay == 0
    frame = publisher.borrow()
    assert frame is not None
    block_id = frame.block.block_id
    msg = frame.publish()
    with reader.read(msg):
        assert publisher.borrow() is None  # the reader's lease holds the only block
    again = publisher.borrow()
    assert again is not None and again.block.block_id == block_id
    again.publish()
    assert publisher.pool.stats()["published"] == 2
