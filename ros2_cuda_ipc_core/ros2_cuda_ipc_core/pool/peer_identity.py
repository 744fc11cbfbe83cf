"""Who serves a pool's socket, by what the kernel says, in whichever pid namespace it runs.

A pool socket's name states its publisher's pid and the pid namespace that numbers it (:mod:`.socket_names`).
A reader holds the process behind the socket to both:

- same pid namespace: ``SO_PEERCRED``'s pid is the named pid;
- a namespace nested in the reader's (a container seen from the host): the server's ``NSpid`` chain (from a
  pidfd of the peer, ``SO_PEERPIDFD``, else ``/proc/<pid>/status``) ends in the named pid, and its pid
  namespace (``/proc/<pid>/ns/pid``) is the named one;
- a namespace the reader cannot see into (sibling containers): the kernel gives no pid (``SO_PEERCRED`` says
  0); the name cannot be checked against a process, and the server is trusted as any same-user peer is, by
  its uid and by holding the name (an abstract name has one holder while it is bound).

What the kernel would say but will not (``/proc`` hidden or not mounted) is :class:`IdentityUnverifiableError`:
the reader falls back to the publisher's CPU twin and says why, rather than trusting or dropping silently.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

from ..errors import IdentityUnverifiableError, PoolIdentityError
from .socket_names import SocketOwner

_UCRED = struct.Struct("3i")  # pid, uid, gid
_SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux 6.5; Python 3.13 names it
_MAX_STATUS_BYTES = 1 << 16  # /proc/<pid>/status and a pidfd's fdinfo are a few hundred bytes


@dataclass(frozen=True)
class PeerIdentity:
    """The process at the other end of a Unix socket, as this process sees it."""

    pid: int  #: as this pid namespace numbers it; 0 when it is not visible from here
    uid: int
    gid: int

    @classmethod
    def of(cls, sock: socket.socket) -> PeerIdentity:
        return cls(*_UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)))


def verify_server(sock: socket.socket, peer: PeerIdentity, owner: SocketOwner, pool_name: str) -> str:
    """Refuse a server that is not the process its socket's name states; how it was verified, in words."""
    if owner.in_this_pid_namespace:
        if peer.pid != owner.pid:
            raise PoolIdentityError(f"{pool_name} is served by pid {peer.pid}, not by pid {owner.pid} its name "
                                    "states: another process's socket, not that pool's")
        return "same pid namespace"
    if peer.pid == 0:
        return (f"pid {owner.pid} of pid namespace {owner.pid_namespace}, which this process cannot see into: "
                "trusted by its uid and its socket, as same-user peers are")
    chain, namespace = _namespaced_pid(sock, peer.pid)
    if chain is None or namespace is None:
        raise IdentityUnverifiableError(
            f"{pool_name}: its publisher (pid {owner.pid} of pid namespace {owner.pid_namespace}) runs as pid "
            f"{peer.pid} here, and /proc will not say which namespace and pid that is (hidepid, or no /proc)")
    if chain[-1] != owner.pid or namespace != owner.pid_namespace:
        raise PoolIdentityError(f"{pool_name} is served by pid {chain[-1]} of pid namespace {namespace} (pid "
                                f"{peer.pid} here), not by pid {owner.pid} of namespace {owner.pid_namespace} its "
                                "name states: another process's socket, not that pool's")
    return f"pid {owner.pid} of pid namespace {owner.pid_namespace} (pid {peer.pid} here), by its NSpid chain"


def _namespaced_pid(sock: socket.socket, pid: int) -> tuple[tuple[int, ...] | None, int | None]:
    """(the peer's NSpid chain, outermost visible first; the inode of its own pid namespace), None where unknown.

    The chain comes from a pidfd of the peer where the kernel gives one (it names the very process that
    connected, whatever happened to its pid since), else from ``/proc/<pid>/status``."""
    chain = None
    try:
        pidfd = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
    except OSError:
        pidfd = -1
    try:
        if pidfd >= 0:
            chain = _nspid(_read_small(f"/proc/self/fdinfo/{pidfd}"))
        if chain is None:
            chain = _nspid(_read_small(f"/proc/{pid}/status"))
        if chain is None or chain[0] != pid:
            return None, None
        namespace = os.stat(f"/proc/{pid}/ns/pid").st_ino
        # Still the same process: a pidfd's Pid turns -1 once it exits (then its pid may name another process).
        if pidfd >= 0 and _nspid(_read_small(f"/proc/self/fdinfo/{pidfd}")) != chain:
            return None, None
        return chain, namespace
    except OSError:
        return chain, None
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _read_small(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read(_MAX_STATUS_BYTES)


def _nspid(status: bytes) -> tuple[int, ...] | None:
    """The ``NSpid:`` line's pids (decimal digits only); None if absent or malformed."""
    for line in status.splitlines():
        if line.startswith(b"NSpid:"):
            fields = line[6:].split()
            if fields and all(field.isdigit() and field.isascii() and len(field) <= 10 for field in fields):
                return tuple(int(field) for field in fields)
            return None
    return None
