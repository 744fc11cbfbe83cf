"""``TypedReader``: typed messages to leased views, each layout checked before any lease is taken."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

from ..errors import InvalidDescriptorError
from ..memory.streams import StreamLike, stream_handle
from ..node.diagnostics import ReaderDiagnostics, stamp_read
from ..pool.read_handle import ReadHandle
from ..pool.reader import Reader
from .checks import check_message_type
from .layout import BlockLayout, TypedMessage

L = TypeVar("L", bound=BlockLayout)
M = TypeVar("M", bound=TypedMessage)
V = TypeVar("V")


class TypedReader(Generic[L, M, V]):
    """Reads typed messages (a ``core`` and a ``header`` field); subclasses say how to parse and how to view.

    Share one ``Reader`` between typed readers so a pool is imported once per process.  Given the ``node`` it
    reads for (and the ``topic``, for the report), it is reported on ``/diagnostics`` once a second unless
    ``diagnostics=False`` or the node's ``diagnostics`` parameter is false.  A report covers its ``Reader``: the
    reads (and their latency) of every typed reader sharing it, one made without ``node`` included.

    ``message_type``: the message class a subclass reads; :meth:`read` refuses another with a ``TypeError``.
    """

    message_type: ClassVar[type | None] = None

    def __init__(self, reader: Reader | None = None, allowed_uids: Iterable[int] | None = None, *,
                 node: Any = None, topic: str | None = None, diagnostics: bool = True) -> None:
        self.reader = reader if reader is not None else Reader(allowed_uids=allowed_uids)
        self._diagnostics: ReaderDiagnostics | None = None
        if node is not None and diagnostics:
            self.report_to(node, topic)

    def report_to(self, node: Any, topic: str | None = None) -> None:
        """Report this reader on ``/diagnostics`` from ``node`` (for a reader made before its node)."""
        self.close()
        self._diagnostics = ReaderDiagnostics(node, topic, self.reader)

    def layout_of(self, msg: M) -> L:
        """The message's layout, checked against ``msg.core.byte_size``; InvalidDescriptorError naming the field."""
        raise NotImplementedError

    def view_of(self, handle: ReadHandle, layout: L, msg: M, stream: int) -> V:
        """Wrap a fresh lease (``handle``) and its checked ``layout`` in the package's view type."""
        raise NotImplementedError

    def read(self, msg: M, stream: StreamLike = None, *, layout: L | None = None) -> V:
        """Validate the layout (before any lease), then lease the block and view it, ordered on ``stream``.

        ``layout``: ``layout_of(msg)``, where the caller has it checked already (a direct subscription checks a
        template's layout once per block size, not per frame).
        """
        if layout is None:
            if self.message_type is not None:
                check_message_type(msg, self.message_type, type(self).__name__)
            try:
                layout = self.layout_of(msg)
            except InvalidDescriptorError:
                self.reader.counters.add("invalid_descriptors")
                raise
        handle = self.reader.read(msg.core, stream)
        try:
            view = self.view_of(handle, layout, msg, stream_handle(stream))
        except BaseException:
            handle.close()
            raise
        stamp_read(self.reader, msg.header.stamp)  # on this reader's report, and any other of its Reader
        return view

    def stats(self) -> dict[str, int]:
        return self.reader.stats()

    def close(self) -> None:
        """Stop reporting on ``/diagnostics`` (the shared ``Reader`` is left to its owner)."""
        if self._diagnostics is not None:
            self._diagnostics.close()
            self._diagnostics = None
