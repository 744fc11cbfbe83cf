"""The reader's side of the FD handout: check the socket name, connect, check who answers, receive the pool's fds.

Everything before the connection is free: a descriptor whose socket name is not a pool socket's, or
disagrees with its own pool id or publisher pid, or whose publisher (of this pid namespace) is not alive, costs
no connection.  Then the instance is held to what the descriptor claims: the process serving the socket must be
the publisher its name states, in whichever pid namespace it runs (:mod:`.peer_identity`), and the header it
sends must name that pool id and that publisher.
So a same-user process that serves the victim's pool id from a socket of its own, however named, is
never taken for the victim's pool.  The connection and the answer share one ``timeout``: no import blocks
a callback longer than that.

A process asks one pool for one handout at a time: the pool refuses a pid with ``max_per_peer`` handouts sent and
not yet read, and forty subscriptions of one process, each connecting on its own thread on a loaded machine, had
seventeen sent before their threads got the GIL back to read them (a CI run: one refusal, one channel a second late).
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from ..errors import InvalidDescriptorError, PoolIdentityError, PoolUnavailableError
from ..memory.layout import HEADER_SIZE, PoolHeader
from .descriptor import Descriptor, socket_address
from .peer_identity import PeerIdentity, verify_server
from .socket_names import SocketOwner, process_alive, socket_owner

POOL_FD_COUNT = 2  # metadata memfd, block memory


class OtherPoolError(InvalidDescriptorError):
    """The socket answered as a pool, but another one: the descriptor's pool is gone (its socket is fine)."""


def check_socket_name(desc: Descriptor) -> SocketOwner:
    """Refuse, before any connection, a descriptor whose socket is not named as its own pool's, or whose
    ``publisher_pid`` is not the pid the name states; what the name states."""
    owner = socket_owner(desc.socket_path)
    if owner is None:
        raise InvalidDescriptorError(f"{desc.pool_name}: the socket is not named as a ros2_cuda_ipc pool's "
                                     "(@ros2_cuda_ipc/<pid>.<pid ns>/<pool id> or "
                                     ".../ros2_cuda_ipc-<pid>.<pid ns>-<pool id>.sock)")
    if not desc.pool_id.hex().startswith(owner.pool_hex):
        raise InvalidDescriptorError(f"{desc.pool_name}: the socket name says pool {owner.pool_hex}, the descriptor "
                                     f"{desc.pool_id.hex()}")
    if desc.publisher_pid != owner.pid:
        raise PoolIdentityError(f"{desc.pool_name}: the descriptor says publisher pid {desc.publisher_pid}, its "
                                f"socket's name pid {owner.pid}: not that pool's descriptor")
    return owner


def check_publisher_alive(desc: Descriptor, owner: SocketOwner) -> None:
    """Refuse a descriptor whose publisher, by its socket's name a process of this pid namespace, is not running
    (one of another namespace is judged once connected: its pid means nothing here)."""
    if owner.in_this_pid_namespace and not process_alive(owner.pid):
        raise PoolUnavailableError(f"{desc.pool_name}: its publisher (pid {owner.pid}) is not running")


def fetch_pool_fds(desc: Descriptor, allowed_uids: Iterable[int], timeout: float,
                   owner: SocketOwner | None) -> tuple[PoolHeader, list[int], str]:
    """Ask the pool named by ``desc`` for its header and fds within ``timeout`` s: (header, [metadata_fd,
    memory_fd], how its server's identity was verified).

    ``owner``: what the socket's name states, which the serving process must be; None checks no pid.
    """
    sock, header, fds, verified = open_pool_connection(desc, allowed_uids, timeout, owner)
    sock.close()  # the end of the handout: the server counts it as closed
    return header, fds, verified


class _OneAtATime:
    """A lock per socket address, kept while a thread holds or waits for it: a pool that never answers holds up
    this process's connections to it alone, and the table is as large as the connections under way."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    def forget(self) -> None:
        """A forked child's fresh start: the parent's threads that held or awaited a lock are not in it."""
        self._mutex = threading.Lock()
        self._locks = {}

    @contextmanager
    def hold(self, address: str, deadline: float) -> Iterator[bool]:
        """Hold ``address``'s lock until the block ends; yields False if it was not free by ``deadline``."""
        with self._mutex:
            lock, users = self._locks.get(address, (threading.Lock(), 0))
            self._locks[address] = (lock, users + 1)
        got = lock.acquire(timeout=max(deadline - time.monotonic(), 0.0))
        try:
            yield got
        finally:
            if got:
                lock.release()
            with self._mutex:
                lock, users = self._locks[address]
                if users == 1:
                    del self._locks[address]
                else:
                    self._locks[address] = (lock, users - 1)


_one_at_a_time = _OneAtATime()
os.register_at_fork(after_in_child=_one_at_a_time.forget)


def open_pool_connection(desc: Descriptor, allowed_uids: Iterable[int], timeout: float,
                         owner: SocketOwner | None) -> tuple[socket.socket, PoolHeader, list[int], str]:
    """Connect to the pool ``desc`` names, check who serves it, receive its handout: (socket, header, fds).

    The socket stays open (blocking, with ``timeout``) for what follows the handout: closing it ends the handout,
    a subscribe request makes it a direct channel (:mod:`..direct`).  Checks as :func:`fetch_pool_fds` says.
    """
    address = socket_address(desc.socket_path)
    deadline = time.monotonic() + timeout
    with _one_at_a_time.hold(address, deadline) as free:
        if not free:
            raise PoolUnavailableError(f"{desc.pool_name} did not answer within {timeout:g} s (another thread of "
                                       "this process was still waiting for its handout)")
        return _receive_handout(desc, allowed_uids, timeout, owner, address, deadline)


def _receive_handout(desc: Descriptor, allowed_uids: Iterable[int], timeout: float, owner: SocketOwner | None,
                     address: str, deadline: float) -> tuple[socket.socket, PoolHeader, list[int], str]:
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    except OSError as exc:
        raise _unavailable(desc, exc) from None
    fds: list[int] = []
    try:
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            peer = PeerIdentity.of(sock)
            if peer.uid not in {os.getuid(), *allowed_uids}:
                raise PoolUnavailableError(
                    f"{desc.pool_name} is served by uid {peer.uid}, neither this user nor allow-listed: not trusted")
            verified = "not checked" if owner is None else verify_server(sock, peer, owner, desc.pool_name)
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            data, fds, flags, _ = socket.recv_fds(sock, HEADER_SIZE + 1, POOL_FD_COUNT + 1, socket.MSG_CMSG_CLOEXEC)
            sock.settimeout(timeout)
        except (FileNotFoundError, ConnectionRefusedError):
            raise PoolUnavailableError(f"{desc.pool_name}: nothing listens there (publisher gone?)") from None
        except TimeoutError:
            raise PoolUnavailableError(f"{desc.pool_name} did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise _unavailable(desc, exc) from None
        if not data and not fds:
            raise PoolUnavailableError(f"{desc.pool_name} closed the connection without handing out fds "
                                       "(refused: another user, or too many handouts open? see the publisher's log)")
        if flags & socket.MSG_CTRUNC and len(fds) < POOL_FD_COUNT and not _fds_free(POOL_FD_COUNT):
            raise PoolUnavailableError(f"{desc.pool_name}: this process has no free file descriptors to receive the "
                                       "pool's (RLIMIT_NOFILE; ulimit -n)")
        if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC) or len(fds) != POOL_FD_COUNT or len(data) != HEADER_SIZE:
            raise InvalidDescriptorError(f"{desc.pool_name} answered {len(data)} bytes and {len(fds)} fds: "
                                         "not a ros2_cuda_ipc pool")
        header = PoolHeader.unpack(data)
        if header.pool_id != desc.pool_id:
            raise OtherPoolError(f"{desc.pool_name} is now pool {header.pool_id.hex()[:8]}: "
                                 "the descriptor's pool is gone")
        if header.publisher_pid != desc.publisher_pid:
            raise PoolIdentityError(f"{desc.pool_name}: its header names publisher pid {header.publisher_pid}, the "
                                    f"descriptor and the socket's name pid {desc.publisher_pid}")
    except BaseException:
        sock.close()
        for fd in fds:
            os.close(fd)
        raise
    return sock, header, fds, verified


def _unavailable(desc: Descriptor, exc: OSError) -> PoolUnavailableError:
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return PoolUnavailableError(f"{desc.pool_name}: this process is out of file descriptors ({exc.strerror}; "
                                    "RLIMIT_NOFILE, ulimit -n)")
    return PoolUnavailableError(f"{desc.pool_name}: {exc.strerror or exc}")


def _fds_free(count: int) -> bool:
    """Whether this process can open ``count`` more descriptors now (a truncated SCM_RIGHTS is the kernel's
    way of saying it could not)."""
    opened: list[int] = []
    try:
        for _ in range(count):
            opened.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
    except OSError:
        return False
    finally:
        for fd in opened:
            os.close(fd)
    return True
