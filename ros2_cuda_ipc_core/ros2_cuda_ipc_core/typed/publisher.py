"""``TypedPublisher``: a pool of blocks sized for one layout and a typed message publisher on one topic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from ..direct.sender import DirectSender
from ..memory.streams import StreamLike
from ..memory.transfer import copy_rows
from ..node.diagnostics import PoolDiagnostics
from ..pool.block_manager import DEFAULT_REUSE_DELAY, BlockManager, MemoryKind
from ..pool.publish_block import PublishBlock
from .checks import check_count, check_index, check_optional_count
from .frame import TypedFrame
from .layout import BlockLayout, TypedMessage
from .twins import CpuTwins, TwinSpec, twin_topic

if TYPE_CHECKING:
    from .reader import TypedReader

L = TypeVar("L", bound=BlockLayout)
M = TypeVar("M", bound=TypedMessage)


class TypedPublisher(Generic[L, M]):
    """Publishes ``message_type`` messages whose payload (laid out as ``layout``) stays in this process's blocks.

    The message type must have a ``header`` and a ``core`` (``BufferCore``) field; ``layout.fill_message``
    writes the rest.  Blocks hold ``block_size`` bytes, by default the layout's ``padded_extent``.
    A published block is reused only ``reuse_delay`` seconds later (default 10 ms, so that its descriptor
    is not overtaken in flight): ``block_count / reuse_delay`` publishes a second at most, 400 with the
    defaults; 0 lets a block be reused as soon as its readers let go.  Negative or non-finite: ValueError.

    CPU twins (DESIGN §11): a subclass that offers :meth:`twin_specs` also advertises ``sensor_msgs`` twins
    named by :func:`twin_topic` from the resolved topic (or ``fallback_topic``) and feeds them only while they
    have subscribers, at most ``fallback_rate`` Hz (0: every frame), off the publishing thread
    (:attr:`twins`, ``fallback_stats()``).  ``fallback=False`` advertises none.  ``node=None`` makes a local
    publisher: its messages are returned, never sent (the subscriptions' uploads of fallback frames).
    The pool is reported on ``/diagnostics`` once a second unless ``diagnostics=False`` (or the node's
    ``diagnostics`` parameter is false).

    Subscribers that asked for ``delivery="direct"`` get each publication on their connection to the pool too,
    before it goes to DDS (DESIGN §14); with none, that costs a publish one dictionary lookup.
    """

    def __init__(self, node: Any, topic: str, message_type: type[M], layout: L, *, block_size: int | None = None,
                 block_count: int = 4, memory: MemoryKind = "auto", device: int = 0, qos: Any = 10,
                 reuse_delay: float = DEFAULT_REUSE_DELAY, fallback: bool = True, fallback_rate: float = 0.0,
                 fallback_topic: str | None = None, diagnostics: bool = True) -> None:
        block_size = check_optional_count("block_size", block_size)
        block_count = check_count("block_count", block_count)
        device = check_index("device", device)
        self.layout = layout
        self.message_type = message_type
        # The next message is built ahead, after the previous publish, with the layout's fields written: constructing
        # and filling one (its header, core and arrays) costs more than the rest of a publish at camera rates, paid
        # cold after the idle gap, and it would sit between stamp and send.  Each spare says which layout it holds.
        # Made first: a layout that cannot fill its message leaves nothing to close.
        self._spare: list[tuple[M, L]] = [self._prepared_message()]
        self._extent = (layout, _message_extent(layout))
        self.pool = BlockManager(block_size or layout.padded_extent, block_count=block_count, memory=memory,
                                 device=device, reuse_delay=reuse_delay)
        self.topic = topic
        self._node = node
        self._publisher = None if node is None else node.create_publisher(message_type, topic, qos)
        self._direct = None if self._publisher is None else DirectSender(self.pool.direct, str(self._publisher.topic_name))
        self.twins: CpuTwins | None = None
        if self._publisher is not None and fallback:
            base = fallback_topic or twin_topic(str(self._publisher.topic_name))
            specs = self.twin_specs(base)
            if specs:
                reader = self.twin_reader()
                cuda = self.pool.device if self.pool.memory == "cuda" else None
                self.twins = CpuTwins(node, specs, reader.read, qos=qos, rate=fallback_rate, cuda_device=cuda,
                                      name=str(self._publisher.topic_name))
        self._diagnostics = PoolDiagnostics(node, topic, self.pool) if diagnostics and node is not None else None

    def _prepared_message(self) -> tuple[M, L]:
        """A new message with :attr:`layout`'s fields written, and that layout."""
        msg, layout = self.message_type(), self.layout
        layout.fill_message(msg)
        return msg, layout

    def twin_specs(self, base_topic: str) -> list[TwinSpec]:
        """The CPU twins of this publisher, the first on ``base_topic``; none by default."""
        return []

    def twin_reader(self) -> TypedReader[L, M, Any]:
        """A typed reader of this publisher's own messages, for the twins' downloads."""
        raise NotImplementedError

    def fallback_stats(self) -> dict[str, int]:
        """The twins' counters (:meth:`CpuTwins.stats`); empty without twins."""
        return {} if self.twins is None else self.twins.stats()

    @property
    def subscription_count(self) -> int:
        """Subscriptions the middleware has matched with this publisher now; a message published before a
        subscription matched does not reach it (volatile durability), so wait for this, not for the ROS graph."""
        return 0 if self._publisher is None else int(self._publisher.get_subscription_count())

    def borrow(self, timeout: float = 0.0) -> TypedFrame[L, M] | None:
        """A writable frame of :attr:`layout`, or None if every block is still in use after ``timeout`` seconds."""
        block = self.pool.acquire_for_publish(timeout)
        return None if block is None else TypedFrame(self, block, self.layout)

    def publish_block(self, block: PublishBlock, layout: L | None = None, stream: StreamLike = None,
                      header: Any = None, byte_size: int | None = None) -> M:
        """Publish ``block`` as a message of ``layout`` (default :attr:`layout`) once ``stream``'s work so far is done.

        The message says the block carries ``byte_size`` bytes, by default the layout's padded extent
        when the block has room for it, else its byte extent.
        """
        layout = self.layout if layout is None else layout
        try:
            msg, filled = self._spare.pop()  # atomic: two threads publishing at once never share a message
        except IndexError:
            msg, filled = self.message_type(), None
        if header is not None:
            msg.header = header
        if filled is not layout:
            layout.fill_message(msg)
        if not byte_size:
            known, extent = self._extent
            byte_size = min(block.capacity, extent if known is layout else _message_extent(layout))
        block.prepare_publish(stream, byte_size, into=msg.core)
        if self._direct is not None:
            self._direct.send(msg, layout)
        if self._publisher is not None:
            self._publisher.publish(msg)
        if not self._spare:
            self._spare.append(self._prepared_message())
        if self.twins is not None:
            self.twins.offer(msg)
        return msg

    def publish_bytes(self, data: bytes | memoryview, layout: L | None = None, header: Any = None) -> M | None:
        """Publish ``layout`` read verbatim from host ``data`` (rows, padding and all): one upload, for bridges.

        Returns the message, or None if no block is free.
        """
        layout = self.layout if layout is None else layout
        if layout.byte_extent > self.pool.block_size or len(data) > self.pool.block_size:
            raise ValueError(f"{len(data)} bytes do not fit this publisher's {self.pool.block_size}-byte blocks")
        block = self.pool.acquire_for_publish()
        if block is None:
            return None
        with block:
            host = np.frombuffer(data, dtype=np.uint8)
            cuda = self.pool.device if self.pool.memory == "cuda" else None
            if len(host):
                copy_rows(block.device_ptr, len(host), host.ctypes.data, len(host), len(host), 1, cuda_device=cuda)
            return self.publish_block(block, layout, None, header, byte_size=max(len(host), layout.byte_extent))

    def close(self) -> None:
        if self._diagnostics is not None:
            self._diagnostics.close()
            self._diagnostics = None
        if self.twins is not None:
            self.twins.close()
            self.twins = None
        if self._publisher is not None:
            self._node.destroy_publisher(self._publisher)
            self._publisher = None
        self.pool.close()

    def __enter__(self: _Publisher) -> _Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_Publisher = TypeVar("_Publisher", bound=TypedPublisher[Any, Any])


def _message_extent(layout: BlockLayout) -> int:
    """The bytes a message of ``layout`` carries when the block has room for them."""
    return max(layout.byte_extent, layout.padded_extent)
