"""Leases are Linux open-file-description (OFD) byte locks on the metadata memfd.

The kernel drops an OFD lock when the last descriptor of its open file
description closes, which includes the death of the holding process: a
crashed reader can never pin a block, and nobody waits on a peer that is gone.
A write lock is the publisher writing a block; read locks are readers holding
it.  Locks taken through one open file description never conflict with each
other, so each process opens its own (``reopen``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

_FLOCK = struct.Struct("hhqqi4x")  # struct flock on 64-bit Linux: type, whence, start, len, pid (0 for OFD)
_BUSY = (errno.EAGAIN, errno.EACCES)


def reopen(fd: int, writable: bool = False) -> int:
    """A new open file description of ``fd``'s file, so this process's locks are its own."""
    return os.open(f"/proc/self/fd/{fd}", (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)


class LeaseFile:
    """Non-blocking byte locks through one open file description."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._requests: dict[tuple[int, int], bytes] = {}  # packed once per lock kind and byte, not per read

    def _request(self, kind: int, byte: int) -> bytes:
        """Pack and keep the request for ``kind`` on ``byte``: the callers look it up inline first (a call per
        lock costs more than the lookup), so this runs once per kind and byte."""
        request = self._requests[kind, byte] = _FLOCK.pack(kind, os.SEEK_SET, byte, 1, 0)
        return request

    def _set(self, kind: int, byte: int) -> bool:
        request = self._requests.get((kind, byte)) or self._request(kind, byte)
        try:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, request)
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        return True

    def try_write(self, byte: int) -> bool:
        """Take the exclusive lock on ``byte``; False if anyone else holds any lock on it."""
        return self._set(fcntl.F_WRLCK, byte)

    def try_read(self, byte: int) -> bool:
        """Take a shared lock on ``byte``; False if someone holds the write lock."""
        return self._set(fcntl.F_RDLCK, byte)

    def release(self, byte: int) -> None:
        self._set(fcntl.F_UNLCK, byte)

    def held_by_others(self, byte: int) -> bool:
        """Whether another open file description holds any lock on ``byte`` (F_OFD_GETLK)."""
        request = self._requests.get((fcntl.F_WRLCK, byte)) or self._request(fcntl.F_WRLCK, byte)
        kind = _FLOCK.unpack(fcntl.fcntl(self.fd, fcntl.F_OFD_GETLK, request))[0]
        return kind != fcntl.F_UNLCK

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
