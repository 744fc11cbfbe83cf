"""The pool's FD server: hands the pool's file descriptors to local peers of the same user (or allow-listed ones).

The protocol, one connection per handout (an extension adds steps after 4, never before 3):

1. The peer connects; the server reads its credentials (``SO_PEERCRED``).
2. A uid that is neither the publisher's nor allow-listed is refused (counted ``refused_peers``, logged at
   most every 10 s) and the connection closed.  So is a pid that already holds ``max_per_peer``
   handouts it has not closed (``peer_limit_refusals``): fds in flight count against the publisher's
   user, and a peer that never reads them must not exhaust them.
3. The server sends one message: the pool header (``HEADER_SIZE`` bytes) with ``SCM_RIGHTS``
   [metadata, block memory].  A memfd goes as a fresh read-only open file description made for this
   peer alone (its locks are its own and die with it; nothing can write through it); a CUDA export
   fd goes as it is.
4. The peer reads it and closes.  The server keeps its end until that EOF, at most ``idle_timeout``
   seconds; a peer that lets it time out keeps its handout counted against it until it exits.
5. Or, instead of closing, the peer sends a subscribe request naming a topic (:mod:`.direct.wire`): the
   connection becomes a direct channel (:class:`.direct.channels.DirectChannels`), kept until either end
   closes it, on which the publisher writes a record for every publication on that topic.  Anything else a
   peer sends is ignored.

All of it runs on one daemon thread per pool, on non-blocking sockets, so no peer can stall it.  When
the process is out of file descriptors the listener pauses, backing off to 1 s, and says so once.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .descriptor import socket_address
from .direct.channels import DirectChannels
from .direct.wire import MAX_TOPIC_BYTES, SUBSCRIBE, parse_subscribe
from .memfd import read_only_description
from .socket_names import process_alive
from .stats import Counters
from .throttle import Throttle

log = logging.getLogger("ros2_cuda_ipc")
_UCRED = struct.Struct("3i")  # pid, uid, gid
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_FIRST_PAUSE, _LONGEST_PAUSE = 0.01, 1.0

#: Counters the server keeps in its pool's ``stats()``.
SERVER_COUNTERS = ("fd_handouts", "refused_peers", "peer_limit_refusals", "handout_failures", "accept_pauses")


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
    from .errors import Ros2CudaIpcError

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
        self._outstanding: dict[int, int] = {}  # handouts per peer pid not yet closed by the peer
        self._pause = 0.0  # seconds the listener waits after running out of fds; 0 while accepting
        self._resume_at = 0.0
        self._throttle = Throttle(10.0)
        self._sock = listening_socket(socket_path, self._allowed)
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._sock, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, name=f"ros2_cuda_ipc fd server {socket_path}", daemon=True)
        self._thread.start()

    # --- the loop -----------------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            while True:
                for key, _ in self._selector.select(self._next_timeout()):
                    if key.fileobj == self._wake_r:
                        return
                    try:
                        if key.fileobj is self._sock:
                            self._accept()
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
        if self._outstanding.get(pid, 0) >= self.max_per_peer:
            self._reap_closed(pid)  # a peer closes before it connects again: its EOF may just not be read yet
        if self._outstanding.get(pid, 0) >= self.max_per_peer:
            self._refuse(conn, "peer_limit_refusals", f"refused pid {pid}: it holds {self.max_per_peer} handouts it "
                                                      "has not closed (fds in flight count against this user)")
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
        self._outstanding[pid] = self._outstanding.get(pid, 0) + 1
        self._handouts[conn.fileno()] = _Handout(conn, pid, time.monotonic() + self.idle_timeout)
        self._selector.register(conn, selectors.EVENT_READ)

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
            data = handout.conn.recv(SUBSCRIBE.size + MAX_TOPIC_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close_handout(fd, peer_closed=True)
            return
        topic = parse_subscribe(data) if self._channels is not None else None
        if topic is None:
            return  # bytes reserved for protocol extensions: ignored, the handout goes on as before
        self._close_handout(fd, peer_closed=True, keep=True)  # the peer has its fds: no longer in flight
        if self._channels is not None and self._channels.add(conn, handout.pid, topic):
            self._channel_conns[fd] = conn
            self._selector.register(conn, selectors.EVENT_READ)
        else:
            self._say(logging.WARNING, "direct_refused", f"refused pid {handout.pid} a direct channel: too many")
            conn.close()

    def _channel_readable(self, fd: int, conn: socket.socket) -> None:
        """A direct channel's peer sent bytes (ignored) or closed, or the publisher shut it down: close it."""
        try:
            if conn.recv(4096):
                return
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self._close_channel(conn)

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
                self._say(logging.INFO, "idle", f"pid {handout.pid} kept its handout open {self.idle_timeout:g} s; "
                          "closed, and counted against it until it exits")
                self._close_handout(fd, peer_closed=False)

    def _close_handout(self, fd: int, peer_closed: bool, keep: bool = False) -> None:
        """End the handout on connection ``fd``; ``keep``: its socket lives on (as a direct channel, or to be closed)."""
        handout = self._handouts.pop(fd)
        self._selector.unregister(handout.conn)
        if not keep:
            handout.conn.close()
        if peer_closed:
            left = self._outstanding.get(handout.pid, 1) - 1
            if left > 0:
                self._outstanding[handout.pid] = left
            else:
                self._outstanding.pop(handout.pid, None)

    def _forget_dead_peers(self) -> None:
        open_pids = {h.pid for h in self._handouts.values()}
        for pid in [p for p in self._outstanding if p not in open_pids and not process_alive(p)]:
            del self._outstanding[pid]

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
