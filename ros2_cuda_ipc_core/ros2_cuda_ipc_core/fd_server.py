"""The pool's FD server: hands the pool's file descriptors to local peers of the same user.

One daemon thread per pool accepts on a Unix stream socket, checks the peer's
credentials (``SO_PEERCRED``), and sends the pool header with the metadata
and block-memory fds (``SCM_RIGHTS``).  Anyone else is refused and logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import struct
import threading
from collections.abc import Iterable

from .descriptor import socket_address
from .stats import Counters

log = logging.getLogger("ros2_cuda_ipc")
_UCRED = struct.Struct("3i")  # pid, uid, gid


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket."""
    return _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))


def listening_socket(socket_path: str) -> socket.socket:
    """Bind ``socket_path`` ('@name' abstract, else a file made mode 0600)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        address = socket_address(socket_path)
        if not address.startswith("\x00"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)  # a socket file left by a crashed pool of the same name
        sock.bind(address)
        if not address.startswith("\x00"):
            os.chmod(address, 0o600)
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock


class FdServer:
    """Serve ``hello`` and ``fds`` to every allowed peer that connects, until closed."""

    def __init__(self, socket_path: str, hello: bytes, fds: list[int], allowed_uids: Iterable[int],
                 counters: Counters) -> None:
        self.socket_path = socket_path
        self._hello, self._fds = hello, list(fds)
        self._allowed = {os.getuid(), *allowed_uids}
        self._counters = counters
        self._sock = listening_socket(socket_path)
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._serve, name=f"ros2_cuda_ipc fd server {socket_path}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj == self._wake_r:
                        return
                    self._answer_one()

    def _answer_one(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except OSError:
            return
        with conn:
            pid, uid, _gid = peer_credentials(conn)
            if uid not in self._allowed:
                self._counters.add("refused_peers")
                log.warning("pool %s refused file descriptors to pid %d (uid %d): not this user nor allow-listed",
                            self.socket_path, pid, uid)
                return
            conn.settimeout(1.0)
            try:
                socket.send_fds(conn, [self._hello], self._fds)
                self._counters.add("fd_handouts")
            except OSError as exc:
                log.info("pool %s: peer pid %d went away during the handout (%s)", self.socket_path, pid, exc)

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
