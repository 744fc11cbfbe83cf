"""``DirectReceiver``: a direct subscription's delivery thread.

It holds one channel per pool instance the subscription reads zero-copy (opened on the pool's own socket,
checked as an import is: the server's pid and uid, the header's pool id and publisher) and runs, in order
and one at a time, everything the subscription hands it: the records its channels bring, and the work
submitted to it (the DDS leg's takes, :mod:`.dds_leg`; twins from the executor's callbacks).  So a callback
never runs on two threads at once, and frames reach it in the order this thread takes them.

A channel that ends (its publisher closed or died, a record that is not one, a template that does not
decode) or that the pool refused is closed and not opened again for that instance: its frames keep coming
over DDS.  Each is counted (``direct_channels_ended``, ``direct_refused``) and said once at WARNING.

No channel can starve the others: each turn of the thread reads at most ``_RECV_BYTES`` from a channel and
handles at most ``RECORDS_PER_TURN`` of its records, then moves on (the rest wait in the channel's buffer).
A handler that returns False for a frame (it named nothing readable: stale, invalid) counts against the
channel; ``MAX_UNUSABLE`` such frames in a row end it (``direct_channels_ended``): a pool that floods forged
records is heard no more, and its genuine frames, if any, still come over DDS.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import Ros2CudaIpcError
from ..pool.descriptor import Descriptor, InstanceKey
from ..pool.fd_client import open_pool_connection
from ..pool.imported_pool import close_fds
from ..pool.socket_names import socket_owner
from ..stats import Counters
from ..throttle import Throttle
from .switch_interval import switch_interval
from .wire import Frame, RecordReader, Refused, Template, subscribe_request

log = logging.getLogger("ros2_cuda_ipc")

#: Channels one subscription keeps (one per publisher pool it reads zero-copy).
MAX_CHANNELS = 64
CONNECT_TIMEOUT = 0.5
CONNECT_TRIES = 5  # a channel that failed to open is tried again after 1, 2, 4, 8 s; then its frames stay on DDS
_REMEMBERED_RETRIES = 256
#: A channel's share of one turn of the thread: bytes read, records handled.
_RECV_BYTES = 1 << 14
RECORDS_PER_TURN = 16
#: Frames in a row that named nothing readable, after which a channel is ended as forged.
MAX_UNUSABLE = 64

#: What this process's receivers have said: each kind of end or refusal once (their counters keep the rest).
_ONCE = Throttle(float("inf"))

#: What the delivery thread calls for each frame: (instance, the template message, the frame record); it may return
#: False when the frame named nothing readable (anything else: it did).
FrameHandler = Callable[[InstanceKey, Any, Frame], "bool | None"]


@dataclass(eq=False)
class _Channel:
    sock: socket.socket
    instance: InstanceKey
    records: RecordReader = field(default_factory=RecordReader)
    template_id: int = 0
    template: Any = None
    pending: collections.deque[Template | Frame | Refused] = field(default_factory=collections.deque)
    unusable: int = 0  #: frames in a row that named nothing readable


class DirectReceiver:
    """Runs ``on_frame`` for every direct record and every submitted callable on one thread, ``name``.

    ``decode`` turns a template's CDR into the typed message (``deserialize_message`` of the subscription's
    type); ``allowed_uids`` and ``check_pid`` are the subscription's reader's, so a channel is trusted
    exactly as far as the import it follows.
    """

    def __init__(self, name: str, on_frame: FrameHandler, decode: Callable[[bytes], Any],
                 allowed_uids: Iterable[int] = (), check_pid: bool = True) -> None:
        self._on_frame = on_frame
        self._decode = decode
        self._allowed_uids = frozenset(allowed_uids)
        self._check_pid = check_pid
        self.counters = Counters("direct_frames", "direct_templates", "direct_channels_opened",
                                 "direct_channels_ended", "direct_connect_failures", "direct_refused",
                                 "callback_errors")
        self._work: collections.deque[Callable[[], None]] = collections.deque()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._wake_lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._channels: dict[InstanceKey, _Channel] = {}
        self._tried: set[InstanceKey] = set()  # instances a channel was opened (or refused) for: never again
        #: Instances whose channel could not be opened (a server slow under load, say): when to try again, tries so far.
        self._retry: dict[InstanceKey, tuple[float, int]] = {}
        self._throttle = Throttle(10.0)
        self._behind: set[_Channel] = set()  # channels with records left over from their last turn
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        switch_interval.hold()  # its callbacks get the GIL back soon after a GPU wait (switch_interval.py)
        self._thread.start()

    # --- any thread ---------------------------------------------------------------------------------

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work()`` on the delivery thread, after what was submitted before it."""
        self._work.append(work)
        with self._wake_lock:  # not a number the thread's end closed and the process gave to another file since
            if self._wake_w < 0:
                return  # closed: the receiver drops what is left
            with contextlib.suppress(BlockingIOError):  # the pipe is full of wake-ups already: the thread is awake
                os.write(self._wake_w, b"\0")

    @property
    def on_delivery_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def close(self) -> None:
        """Stop the thread (after the callable or frame it is running) and close every channel."""
        if self._closing:
            return
        self._closing = True
        switch_interval.release()
        self.submit(lambda: None)
        if not self.on_delivery_thread:
            self._thread.join(timeout=10.0)

    def stats(self) -> dict[str, int]:
        stats = self.counters.snapshot()
        stats["direct_channels"] = len(self._channels)
        return stats

    # --- the delivery thread ------------------------------------------------------------------------

    def wants_channel(self, instance: InstanceKey) -> bool:
        """Whether a channel for ``instance`` is worth trying now: none was opened or refused, and a failed try (a
        timeout, a refusal at the door) has waited out its back-off: 1 s, doubling, ``CONNECT_TRIES`` tries."""
        if instance in self._tried:
            return False
        retry = self._retry.get(instance)
        return retry is None or (retry[1] < CONNECT_TRIES and time.monotonic() >= retry[0])

    def connect(self, desc: Descriptor, topic: str) -> None:
        """Open a channel for ``desc``'s instance and ``topic`` unless one was opened for it already, or a failed
        try is still backing off (this thread)."""
        instance = desc.instance
        if not self.wants_channel(instance) or len(self._channels) >= MAX_CHANNELS:
            return
        tries = self._retry.get(instance, (0.0, 0))[1]
        if len(self._retry) >= _REMEMBERED_RETRIES:
            self._retry.clear()
        self._retry[instance] = (time.monotonic() + 2.0 ** tries, tries + 1)
        owner = socket_owner(desc.socket_path)
        checked_owner = owner if self._check_pid else None
        try:
            sock, _header, fds, _verified = open_pool_connection(desc, self._allowed_uids, CONNECT_TIMEOUT,
                                                                 checked_owner)
        except Ros2CudaIpcError as exc:
            self.counters.add("direct_connect_failures")
            self._say_once("connect", f"{desc.pool_name}: no direct channel ({exc}); its frames come over DDS "
                                      "(said once; counted in stats()['direct']['direct_connect_failures'])")
            return
        close_fds(fds)  # the import this channel follows holds the pool's own
        try:
            sock.sendall(subscribe_request(topic))
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            self.counters.add("direct_connect_failures")
            self._say_once("connect", f"{desc.pool_name}: no direct channel ({exc}); its frames come over DDS "
                                      "(said once; counted in stats()['direct']['direct_connect_failures'])")
            return
        channel = _Channel(sock, instance)
        self._tried.add(instance)
        self._retry.pop(instance, None)
        self._channels[instance] = channel
        self._selector.register(sock, selectors.EVENT_READ, channel)
        self.counters.add("direct_channels_opened")

    def _run(self) -> None:
        try:
            while not self._closing:
                behind = list(self._behind)
                for key, _ in self._selector.select(0 if behind else None):
                    if key.fileobj == self._wake_r:
                        self._drain_wake()
                    elif key.data not in self._behind:
                        self._readable(key.data)
                for channel in behind:
                    self._deliver(channel)
                self._run_work()
        finally:
            for channel in list(self._channels.values()):
                self._end(channel, None)
            self._selector.close()
            os.close(self._wake_r)
            with self._wake_lock:
                os.close(self._wake_w)
                self._wake_w = -1

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _run_work(self) -> None:
        work = self._work
        while work and not self._closing:
            self._guarded(work.popleft())

    def _readable(self, channel: _Channel) -> None:
        try:
            data = channel.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._end(channel, f"{exc.strerror or exc}")
            return
        if not data:
            self._end(channel, "the publisher closed it")
            return
        try:
            channel.pending.extend(channel.records.feed(data))
        except Exception as exc:  # a record that is not one: the channel ends
            self._end(channel, f"{type(exc).__name__}: {exc}")
            return
        self._deliver(channel)

    def _deliver(self, channel: _Channel) -> None:
        """Handle up to ``RECORDS_PER_TURN`` of ``channel``'s records; it reads on in a later turn if more are left."""
        pending = channel.pending
        try:
            for _ in range(min(len(pending), RECORDS_PER_TURN)):
                record = pending.popleft()
                if isinstance(record, Frame):
                    if record.template_id != channel.template_id or channel.template is None:
                        raise Ros2CudaIpcError(f"a frame of template {record.template_id}, the channel has "
                                               f"{channel.template_id}")
                    self.counters.add("direct_frames")
                    if self._guarded(self._on_frame, channel.instance, channel.template, record) is not False:
                        channel.unusable = 0
                    else:
                        channel.unusable += 1
                        if channel.unusable >= MAX_UNUSABLE:
                            raise Ros2CudaIpcError(f"{MAX_UNUSABLE} frames in a row named nothing readable")
                elif isinstance(record, Template):
                    channel.template, channel.template_id = self._decode(record.cdr), record.template_id
                    self.counters.add("direct_templates")
                else:
                    self.counters.add("direct_refused")
                    self._end(channel, None)
                    self._say_once("refused", f"the pool {channel.instance[0].hex()[:8]} refused this subscription "
                                   f"a direct channel ({record.reason}); its frames come over DDS "
                                   "(counted in stats()['direct']['direct_refused'])")
                    return
        except Exception as exc:  # a frame before its template, a template that does not decode: the channel ends
            self._end(channel, f"{type(exc).__name__}: {exc}")
            return
        if pending:
            self._behind.add(channel)
        else:
            self._behind.discard(channel)

    def _guarded(self, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)``; a callback's exception is logged (with its traceback, at most every 10 s), never fatal."""
        try:
            return work(*args)
        except Exception:
            self.counters.add("callback_errors")
            if self._throttle.ready("callback"):
                log.exception("%s: a callback raised (%d so far); delivering on", self._thread.name,
                              self.counters.snapshot()["callback_errors"])

    def _end(self, channel: _Channel, why: str | None) -> None:
        self._channels.pop(channel.instance, None)
        self._behind.discard(channel)
        channel.pending.clear()
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(channel.sock)
        channel.sock.close()
        if why is not None:
            self.counters.add("direct_channels_ended")
            self._say_once("end", f"the direct channel of pool {channel.instance[0].hex()[:8]} ended ({why}); "
                           "its frames come over DDS (said once; counted in stats()['direct']"
                           "['direct_channels_ended'])")

    def _say_once(self, key: str, what: str) -> None:
        if _ONCE.ready(key):
            log.warning("%s: %s", self._thread.name, what)
