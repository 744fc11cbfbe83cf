"""Sealed memfds: anonymous files that are safe to hand to other processes.

A peer can only crash us through a shared file by shrinking it under our
mapping (SIGBUS).  So every memfd a pool hands out is sealed against growing
and shrinking, and a reader refuses one that is not.
"""

from __future__ import annotations

import fcntl
import mmap
import os

from .errors import InvalidDescriptorError

_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def create_sealed(name: str, size: int) -> int:
    """A new memfd of ``size`` bytes (zeroed), sealed so its size never changes."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_sealed(fd: int, min_size: int, what: str) -> None:
    """Refuse a peer's fd that could change size under a mapping, or is smaller than it claims."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise InvalidDescriptorError(f"{what} is not a sealed memfd") from None
    if seals & (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW) != (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW):
        raise InvalidDescriptorError(f"{what} is not sealed against resizing")
    size = os.fstat(fd).st_size
    if size < min_size:
        raise InvalidDescriptorError(f"{what} holds {size} bytes, the pool header promises {min_size}")


def map_fd(fd: int, size: int, writable: bool) -> mmap.mmap:
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    return mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
