"""``TwinUpload``: a CPU twin message into a block of this process, read back as the typed package's own view.

A subscription that receives a frame through its publisher's twin hands its callback the same view type
(``ImageView``, ``PointCloudView``) as a zero-copy frame: the message's bytes are uploaded (one copy) into
a local publisher's block, which nothing sends, and read through the same-process path.  Blocks are
host memory, or CUDA memory when the consumer asked for it.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ..pool.block_manager import MemoryKind
from .publisher import TypedPublisher

P = TypeVar("P", bound=TypedPublisher[Any, Any])

__all__ = ["TwinUpload"]


class TwinUpload(Generic[P]):
    """Subclasses say which twin message type they take (``message_type``), whether a message fits the current
    local publisher (:meth:`fits`), how to make one sized by a message (:meth:`make_publisher`, with
    ``node=None`` and ``fallback=False``) and how to upload (:meth:`upload`)."""

    message_type: type

    def __init__(self, block_count: int = 4) -> None:
        self.block_count = block_count
        self._publishers: dict[str, P] = {}

    def fits(self, publisher: P, msg: Any) -> bool:
        raise NotImplementedError

    def make_publisher(self, msg: Any, memory: MemoryKind) -> P:
        raise NotImplementedError

    def upload(self, publisher: P, msg: Any) -> Any | None:
        """Copy ``msg`` into a block of ``publisher`` and return the typed message, or None if no block is free."""
        raise NotImplementedError

    def local_message(self, msg: Any, memory: MemoryKind) -> Any | None:
        """The typed message of ``msg`` uploaded into a local ``memory`` block; None if every block is held."""
        publisher = self._publishers.get(memory)
        if publisher is None or not self.fits(publisher, msg):
            fresh = self.make_publisher(msg, memory)  # first: a message that makes none leaves the old one working
            if publisher is not None:
                publisher.close()
            self._publishers[memory] = publisher = fresh
        return self.upload(publisher, msg)

    def close(self) -> None:
        for publisher in self._publishers.values():
            publisher.close()
        self._publishers.clear()
