"""Leases are Linux open-file-description (OFD) byte locks on the metadata memfd.

The kernel drops an OFD lock when the last descriptor of its open file
description closes, which includes the death of the holding process: a
crashed reader can never pin a block, and nobody waits on a peer that is gone.
Locks taken through one open file description never conflict with each
other, so each process uses its own (``reopen``; the FD server hands every
peer a fresh one).

Each lease (0: the pool's liveness, ``1 + i``: block ``i``) is a span of
``PID_SPAN`` bytes.  The publisher writing a block (or alive, for lease 0)
write-locks the whole span; a reader holding a block read-locks the one byte
of the span at its pid.  So the lock is also the record of who holds the
block, kept by the kernel (OFD locks themselves report pid -1), gone with the
reader, and costing no extra system call: :meth:`LeaseFile.holders` finds them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

_FLOCK = struct.Struct("hhqqi4x")  # struct flock on 64-bit Linux: type, whence, start, len, pid (0 for OFD)
_BUSY = (errno.EAGAIN, errno.EACCES)

#: Bytes of one lease: every pid fits (PID_MAX_LIMIT is 2**22 on 64-bit Linux).
PID_SPAN = 1 << 22
LIVENESS_LEASE = 0
FIRST_BLOCK_LEASE = 1
#: At most this many holders are listed per lease: a hostile peer may take many locks, a report stays cheap.
MAX_LISTED_HOLDERS = 64


def reopen(fd: int, writable: bool = False) -> int:
    """A new open file description of ``fd``'s file, so this process's locks are its own."""
    return os.open(f"/proc/self/fd/{fd}", (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)


def lock_request(kind: int, lease: int, pid: int | None = None) -> bytes:
    """The ``struct flock`` for ``kind`` on ``lease``: its whole span, or with ``pid`` that pid's byte of it."""
    start = lease * PID_SPAN
    return _FLOCK.pack(kind, os.SEEK_SET, start if pid is None else start + pid, PID_SPAN if pid is None else 1, 0)


class LeaseFile:
    """Non-blocking lease locks through one open file description."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pid = os.getpid()
        self._requests: dict[tuple[int, int], bytes] = {}  # packed once per lock kind and lease, not per read

    def _request(self, kind: int, lease: int) -> bytes:
        """Pack and keep the request for ``kind`` on ``lease`` (a read lock: this pid's byte; else the span):
        the callers look it up inline first (a call per lock costs more than the lookup), so this runs once."""
        request = self._requests[kind, lease] = lock_request(kind, lease, self._pid if kind == fcntl.F_RDLCK else None)
        return request

    def _set(self, kind: int, lease: int) -> bool:
        request = self._requests.get((kind, lease)) or self._request(kind, lease)
        try:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, request)
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        return True

    def try_write(self, lease: int) -> bool:
        """Take the exclusive lock on ``lease``; False if anyone else holds any lock on it."""
        return self._set(fcntl.F_WRLCK, lease)

    def try_read(self, lease: int) -> bool:
        """Take a shared lock on ``lease`` (on this pid's byte of it); False if someone holds the write lock."""
        return self._set(fcntl.F_RDLCK, lease)

    def release(self, lease: int) -> None:
        """Drop whatever this description holds on ``lease``; nothing to do once closed (an atexit-time release)."""
        if self.fd >= 0:
            self._set(fcntl.F_UNLCK, lease)

    def _test(self, start: int, length: int) -> tuple[int, int, int]:
        """(type, start, length) of a lock another description holds in ``[start, start + length)``."""
        kind, _, found, span, _ = _FLOCK.unpack(
            fcntl.fcntl(self.fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)))
        return kind, found, span

    def held_by_others(self, lease: int) -> bool:
        """Whether another open file description holds any lock on ``lease`` (F_OFD_GETLK)."""
        request = self._requests.get((fcntl.F_WRLCK, lease)) or self._request(fcntl.F_WRLCK, lease)
        kind = _FLOCK.unpack(fcntl.fcntl(self.fd, fcntl.F_OFD_GETLK, request))[0]
        return kind != fcntl.F_UNLCK

    def holders(self, lease: int) -> list[int]:
        """Pids of the readers holding ``lease`` through other descriptions, in increasing order (-1: a write lock,
        which a reader never takes); at most ``MAX_LISTED_HOLDERS``, one F_OFD_GETLK per holder and gap."""
        start = lease * PID_SPAN
        pids: list[int] = []
        todo = [(start, PID_SPAN)]
        while todo and len(pids) < MAX_LISTED_HOLDERS:
            low, length = todo.pop()
            kind, found, span = self._test(low, length)
            if kind == fcntl.F_UNLCK:
                continue
            span = span or (low + length - found)  # a length of 0 means "to the end of the file and beyond"
            pids.append(found - start if kind == fcntl.F_RDLCK and span == 1 else -1)
            if found > low:
                todo.append((low, found - low))
            if found + span < low + length:
                todo.append((found + span, low + length - found - span))
        return sorted(pids)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
