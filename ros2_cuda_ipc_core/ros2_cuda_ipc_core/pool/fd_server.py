"""The pool's FD server: hands the pool's file descriptors to local peers of the same user (or allow-listed ones).

The protocol, one connection per handout (an extension adds steps after 4, never before 3):

1. The peer connects; the server reads its credentials (``SO_PEERCRED``).
2. A uid that is neither the publisher's nor allow-listed is refused (counted ``refused_peers``, logged at
   most every 10 s) and the connection closed.  So is a pid that already has ``max_per_peer`` handouts in
   flight (``peer_limit_refusals``): fds sent that it has not read yet (the socket's unread bytes,
   ``SIOCOUTQ``) count against the publisher's user, and a peer that never reads them must not exhaust
   them.  A handout the peer has read is not in flight, whether it closes it, keeps it, or makes it a
   direct channel; a pid keeps at most ``4 * max_per_peer`` connections open at once all the same.
3. The server sends one message: the pool header (``HEADER_SIZE`` bytes) with ``SCM_RIGHTS``
   [metadata, block memory].  A memfd goes as a fresh read-only open file description made for this
   peer alone (its locks are its own and die with it; nothing can write through it); a CUDA export
   fd goes as it is.
4. The peer reads it and closes.  The server keeps its end until that EOF, at most ``idle_timeout``
   seconds; a peer that lets it time out without reading it keeps it counted against it until it exits.
5. Or, instead of closing, the peer sends a subscribe request naming a topic (:mod:`..direct.wire`), in as
   many writes as it likes: the connection becomes a direct channel
   (:class:`..direct.channels.DirectChannels`), kept until either end closes it, on which the publisher writes
   a record for every publication on that topic.  A channel the pool will not keep gets a ``REFUSED`` record
   and is closed.  Bytes that are not a request, and any byte a channel's peer sends after it, close the
   connection at once (``malformed_requests``, ``direct_garbage``; said once at WARNING).

All of it runs on one daemon thread per pool, on non-blocking sockets, so no peer can stall it.  When
the process is out of file descriptors the listener pauses, backing off to 1 s, and says so once.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import logging
import os
import selectors
import socket
import struct
import termios
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..direct.channels import DirectChannels
from ..direct.wire import INCOMPLETE, MAX_REQUEST_BYTES, parse_request, refused_record
from ..memory.memfd import read_only_description
from ..stats import Counters
from ..throttle import Throttle
from .descriptor import socket_address
from .socket_names import process_alive

log = logging.getLogger("ros2_cuda_ipc")
_UCRED = struct.Struct("3i")  # pid, uid, gid
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_FIRST_PAUSE, _LONGEST_PAUSE = 0.01, 1.0

#: Counters the server keeps in its pool's ``stats()``.
SERVER_COUNTERS = ("fd_handouts", "refused_peers", "peer_limit_refusals", "handout_failures", "accept_pauses",
                   "malformed_requests", "direct_garbage")
#: Connections one pid may hold open at once, in multiples of ``max_per_peer`` (those in flight).
OPEN_PER_IN_FLIGHT = 4
_READ_WRITE = selectors.EVENT_READ | selectors.EVENT_WRITE


def unread_bytes(sock: socket.socket) -> int:
    """Bytes this end sent that the peer has not read yet (``SIOCOUTQ``); a handout's fds are in flight while > 0."""
    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0])
    except OSError:
        return 0


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket."""
    return _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))


def listening_socket(socket_path: str, allowed_uids: Iterable[int] = ()) -> socket.socket:
    """Bind ``socket_path`` ('@name' abstract, else a file made mode 0600 that ``allowed_uids`` may connect to)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
    try:
        address = socket_address(socket_path)
        if not address.startswith("\x00"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)  # a socket file left by a crashed pool of the same name
        sock.bind(address)
        if not address.startswith("\x00"):
            os.chmod(address, 0o600)
            others = sorted(set(allowed_uids) - {os.getuid()})
            if others:
                grant_connect(address, others)
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock


def grant_connect(path: str, uids: Sequence[int]) -> None:
    """Let ``uids`` connect to the socket file ``path`` (write permission) through a POSIX ACL; nobody else.

    A socket file's mode cannot name users, and a group would admit all of its members, so an ACL it is;
    a filesystem without ACLs is refused, naming the way out.
    """
    from ..errors import Ros2CudaIpcError

    undefined = 0xFFFFFFFF  # ACL_UNDEFINED_ID
    entries = [(0x01, 6, undefined), *((0x02, 6, uid) for uid in uids),  # USER_OBJ, USER: rw
               (0x04, 0, undefined), (0x10, 6, undefined), (0x20, 0, undefined)]  # GROUP_OBJ, MASK, OTHER
    blob = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", blob)
    except OSError as exc:
        raise Ros2CudaIpcError(
            f"allowed_uids {list(uids)} with socket_dir: the socket {path} needs a POSIX ACL to admit them, and its "
            f"filesystem refused one ({exc.strerror}); put socket_dir on a filesystem with ACLs, or leave socket_dir "
            "unset (the abstract socket admits exactly the allowed uids, checked by SO_PEERCRED)") from None
    if not os.stat(os.path.dirname(path)).st_mode & 0o001:
        log.warning("socket_dir %s is not searchable by other users: allowed uids %s also need search (x) "
                    "permission on it (chmod o+x, or an ACL)", os.path.dirname(path), list(uids))


@dataclass
class _Handout:
    """A connection whose handout was sent and whose peer has not closed yet."""

    conn: socket.socket
    pid: int
    deadline: float
    request: bytearray = field(default_factory=bytearray)  #: the part of a subscribe request read so far


class FdServer:
    """Serve ``hello`` and ``fds`` to every allowed peer that connects, until closed (see the module's protocol).

    ``fresh[i]``: hand out ``fds[i]`` as a new read-only open file description per peer (memfds), else as is.
    ``channels``: where subscribe requests go (step 5); without it a request is ignored like any other bytes.
    """

    def __init__(self, socket_path: str, hello: bytes, fds: Sequence[int], allowed_uids: Iterable[int],
                 counters: Counters, *, fresh: Sequence[bool] | None = None, max_per_peer: int = 16,
                 idle_timeout: float = 5.0, channels: DirectChannels | None = None) -> None:
        self.socket_path = socket_path
        self._hello, self._fds = hello, list(fds)
        self._fresh = list(fresh) if fresh is not None else [False] * len(self._fds)
        self._allowed = {os.getuid(), *allowed_uids}
        self._counters = counters
        self.max_per_peer = max_per_peer
        self.idle_timeout = idle_timeout
        self._handouts: dict[int, _Handout] = {}  # by connection fd
        self._channels = channels
        self._channel_conns: dict[int, socket.socket] = {}  # direct channels, by connection fd: watched for their end
        self._to_watch: collections.deque[socket.socket] = collections.deque()  # stalled channels, from the publisher
        self._held: dict[int, int] = {}  # per pid: handouts closed by the idle timeout unread (in flight until it exits)
        self._pause = 0.0  # seconds the listener waits after running out of fds; 0 while accepting
        self._resume_at = 0.0
        self._throttle = Throttle(10.0)
        self._once = Throttle(float("inf"))
        self._closing = False
        self._sock = listening_socket(socket_path, self._allowed)
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        if channels is not None:
            channels.watch_writable = self._watch_writable
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._sock, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, name=f"ros2_cuda_ipc fd server {socket_path}", daemon=True)
        self._thread.start()

    # --- the loop -----------------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            while True:
                for key, events in self._selector.select(self._next_timeout()):
                    if key.fileobj == self._wake_r:
                        if self._woken():
                            return
                        continue
                    try:
                        if key.fileobj is self._sock:
                            self._accept()
                        elif events & selectors.EVENT_WRITE:
                            self._channel_writable(key.fileobj)
                        else:
                            self._peer_readable(key.fileobj)
                    except Exception:  # one peer's trouble, or a bug, must not end the handouts to everyone
                        log.exception("pool %s: the fd server failed on one connection; serving on",
                                      self.socket_path)
                self._expire_idle()
                if self._pause and time.monotonic() >= self._resume_at:
                    self._selector.register(self._sock, selectors.EVENT_READ)
                    self._resume_at = float("inf")  # paused until an accept succeeds; registered again meanwhile
        finally:
            for handout in list(self._handouts.values()):
                handout.conn.close()
            self._handouts.clear()
            for conn in list(self._channel_conns.values()):
                self._close_channel(conn)
            self._selector.close()

    def _woken(self) -> bool:
        """Drain the wake-ups; watch the channels that stalled since; True when the server is to stop."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass
        while self._to_watch:
            conn = self._to_watch.popleft()
            if self._channel_conns.get(conn.fileno()) is conn:
                self._selector.modify(conn, _READ_WRITE)
        return self._closing

    def _watch_writable(self, conn: socket.socket) -> None:
        """A channel stalled (the publishing thread): tell the server thread to watch for its peer's reading."""
        self._to_watch.append(conn)
        with contextlib.suppress(OSError):  # full: the server is awake already; closed: it is gone
            os.write(self._wake_w, b"w")

    def _channel_writable(self, conn: object) -> None:
        if isinstance(conn, socket.socket) and self._channel_conns.get(conn.fileno()) is conn:
            assert self._channels is not None
            self._selector.modify(conn, selectors.EVENT_READ)
            self._channels.resume(conn)

    def _next_timeout(self) -> float | None:
        deadlines = [h.deadline for h in self._handouts.values()]
        if self._pause and self._resume_at != float("inf"):
            deadlines.append(self._resume_at)
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _accept(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as exc:
            if exc.errno in _OUT_OF_FDS:
                self._pause_listening(exc)
            return
        conn.setblocking(False)  # a peer must never stall the server: not on send, not on a read
        if self._pause:
            log.info("pool %s accepts connections again", self.socket_path)
            self._pause = 0.0
        self._answer(conn)

    def _pause_listening(self, exc: OSError) -> None:
        """Out of fds: a pending connection would wake the selector at once, for ever; stop listening a while."""
        self._selector.unregister(self._sock)
        if not self._pause:
            log.warning("pool %s cannot accept connections: %s; pausing, up to %g s at a time, until fds are free",
                        self.socket_path, exc.strerror, _LONGEST_PAUSE)
        self._pause = min(_LONGEST_PAUSE, max(_FIRST_PAUSE, self._pause * 2))
        self._resume_at = time.monotonic() + self._pause
        self._counters.add("accept_pauses")

    # --- one peer -----------------------------------------------------------------------------------

    def _answer(self, conn: socket.socket) -> None:
        pid, uid, _gid = peer_credentials(conn)
        if uid not in self._allowed:
            self._refuse(conn, "refused_peers", f"refused file descriptors to pid {pid} (uid {uid}): not this user "
                                                "nor allow-listed")
            return
        self._forget_dead_peers()
        if not self._within_limits(pid):
            self._reap_closed(pid)  # a peer closes before it connects again: its EOF may just not be read yet
        if not self._within_limits(pid):
            self._refuse(conn, "peer_limit_refusals", f"refused pid {pid}: it has {self.max_per_peer} handouts in "
                         f"flight (sent, not read: fds in flight count against this user) or "
                         f"{OPEN_PER_IN_FLIGHT * self.max_per_peer} connections open")
            return
        try:
            fds = [read_only_description(fd) if fresh else fd for fd, fresh in zip(self._fds, self._fresh, strict=True)]
        except OSError as exc:
            conn.close()
            if exc.errno in _OUT_OF_FDS:
                self._pause_listening(exc)
            return
        try:
            self._counters.add("fd_handouts")  # before the peer can see its fds; taken back if the send fails
            socket.send_fds(conn, [self._hello], fds)
        except OSError as exc:
            conn.close()
            self._counters.add("fd_handouts", -1)
            self._counters.add("handout_failures")
            if exc.errno == errno.ETOOMANYREFS:
                self._say(logging.WARNING, "too_many_refs", f"cannot hand fds to pid {pid}: this user's fds in "
                          "flight are exhausted (ETOOMANYREFS): peers hold handouts without reading them")
            else:
                self._say(logging.INFO, "went_away", f"peer pid {pid} went away during the handout ({exc})")
            return
        finally:
            for fd, fresh in zip(fds, self._fresh, strict=True):
                if fresh:
                    os.close(fd)
        self._handouts[conn.fileno()] = _Handout(conn, pid, time.monotonic() + self.idle_timeout)
        self._selector.register(conn, selectors.EVENT_READ)

    def _within_limits(self, pid: int) -> bool:
        """Whether ``pid`` may have another handout: fewer than ``max_per_peer`` in flight and few enough open."""
        mine = [h for h in self._handouts.values() if h.pid == pid]
        if len(mine) >= OPEN_PER_IN_FLIGHT * self.max_per_peer:
            return False
        in_flight = self._held.get(pid, 0)
        if len(mine) + in_flight < self.max_per_peer:
            return True  # no need to ask the kernel
        return in_flight + sum(1 for h in mine if unread_bytes(h.conn)) < self.max_per_peer

    def _refuse(self, conn: socket.socket, counter: str, why: str) -> None:
        self._counters.add(counter)  # first: the peer may look at the counters as soon as it sees the close
        conn.close()
        self._say(logging.WARNING, counter, why)

    def _peer_readable(self, conn: object) -> None:
        """The peer sent bytes or closed.  ``conn`` may be gone already: an event of this batch can name a
        connection that :meth:`_reap_closed` closed earlier in it (its fd even reused since)."""
        fd = conn.fileno() if isinstance(conn, socket.socket) else -1
        if self._channel_conns.get(fd) is conn:
            self._channel_readable(fd, self._channel_conns[fd])
            return
        handout = self._handouts.get(fd)
        if handout is None or handout.conn is not conn:
            return
        try:
            data = handout.conn.recv(MAX_REQUEST_BYTES - len(handout.request) + 1)  # one byte over: too long
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close_handout(fd)
            return
        handout.request += data
        topic = parse_request(handout.request) if self._channels is not None else None
        if topic == INCOMPLETE:
            return  # the rest of the request is on its way
        self._close_handout(fd, keep=True)
        if topic is None:
            self._counters.add("malformed_requests")
            self._say_once("malformed_requests", f"closed pid {handout.pid}'s connection: it sent "
                           f"{len(handout.request)} bytes that are not a subscribe request")
            conn.close()
            return
        refused = self._channels.add(conn, handout.pid, topic) if self._channels is not None else "no channels"
        if refused is None:
            self._channel_conns[fd] = conn
            self._selector.register(conn, selectors.EVENT_READ)
        else:
            with contextlib.suppress(OSError):  # the subscriber learns why; a peer that does not read loses it
                conn.send(refused_record(refused), socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            conn.close()

    def _channel_readable(self, fd: int, conn: socket.socket) -> None:
        """A direct channel's peer closed, or the publisher shut it down, or the peer sent bytes (a subscriber
        sends none after its request): close it."""
        try:
            data = conn.recv(1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self._counters.add("direct_garbage")
            self._say_once("direct_garbage", f"closed a direct channel of pid {self._channel_pid(conn)}: it sent "
                           "bytes after its request (a subscriber sends none)")
        self._close_channel(conn)

    def _channel_pid(self, conn: socket.socket) -> int:
        with contextlib.suppress(OSError):
            return peer_credentials(conn)[0]
        return -1

    def _close_channel(self, conn: socket.socket) -> None:
        assert self._channels is not None
        self._channels.remove(conn)
        self._channel_conns.pop(conn.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()

    def _reap_closed(self, pid: int) -> None:
        """Read, now, the EOFs of ``pid``'s handouts that the peer has closed."""
        for handout in list(self._handouts.values()):
            if handout.pid == pid:
                self._peer_readable(handout.conn)

    def _expire_idle(self) -> None:
        now = time.monotonic()
        for fd, handout in list(self._handouts.items()):
            if handout.deadline <= now:
                unread = unread_bytes(handout.conn) > 0
                self._say(logging.INFO, "idle", f"pid {handout.pid} kept its handout open {self.idle_timeout:g} s; "
                          "closed" + (", unread: counted against it until it exits" if unread else ""))
                if unread:
                    self._held[handout.pid] = self._held.get(handout.pid, 0) + 1
                self._close_handout(fd)

    def _close_handout(self, fd: int, keep: bool = False) -> None:
        """End the handout on connection ``fd``; ``keep``: its socket lives on (as a direct channel, or to be closed)."""
        handout = self._handouts.pop(fd)
        self._selector.unregister(handout.conn)
        if not keep:
            handout.conn.close()

    def _forget_dead_peers(self) -> None:
        for pid in [p for p in self._held if not process_alive(p)]:
            del self._held[pid]

    def _say_once(self, key: str, what: str) -> None:
        if self._once.ready(key):
            log.warning("pool %s %s (said once; counted in stats()['%s'])", self.socket_path, what, key)

    def _say(self, level: int, key: str, what: str) -> None:
        if self._throttle.ready(key):
            more = self._throttle.suppressed(key)
            log.log(level, "pool %s %s%s", self.socket_path, what, f" (and {more} more like it)" if more else "")

    # --- lifetime -----------------------------------------------------------------------------------

    def close_in_child(self) -> None:
        """After ``fork()``: this process's copies of the sockets and pipe go, no thread to stop (it was not forked)."""
        self._sock.close()
        for handout in self._handouts.values():
            handout.conn.close()
        for conn in self._channel_conns.values():  # the parent's channels: its publisher writes them, not this child
            conn.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def close(self) -> None:
        if self._wake_w < 0:
            return
        self._closing = True
        with contextlib.suppress(BlockingIOError):  # full of wake-ups: the server wakes all the same
            os.write(self._wake_w, b"x")
        self._thread.join()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._wake_r = self._wake_w = -1
        address = socket_address(self.socket_path)
        self._sock.close()
        if not address.startswith("\x00"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
