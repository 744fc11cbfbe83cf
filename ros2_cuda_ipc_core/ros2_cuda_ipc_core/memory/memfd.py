"""Sealed memfds: anonymous files that are safe to hand to other processes, and that nobody else can write.

A peer can crash us through a shared file by shrinking it under our mapping (SIGBUS), and could
rewrite frames (or the metadata that says which frame a block holds) if it could write it.  So a
pool's memfds are sealed against growing and shrinking when made and, once the publisher has
mapped them writable, against every *new* write (``F_SEAL_FUTURE_WRITE``, Linux 5.1): writable
mappings, ``mprotect`` to write, ``write``/``pwrite`` and writable re-opens through ``/proc`` are
refused to everyone, the publisher's own existing mapping alone still writes.  Readers get
read-only open file descriptions (:func:`read_only_description`) of files made mode 0444, which on
an older kernel still keeps other users from writing (see docs/decisions.md).  A reader refuses a
memfd that is not sealed the way this kernel allows.
"""

from __future__ import annotations

import fcntl
import functools
import mmap
import os

from ..errors import InvalidDescriptorError

#: ``F_SEAL_FUTURE_WRITE`` (linux/fcntl.h, Linux 5.1); Python's fcntl names it only from 3.13 on some builds.
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)
_SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


@functools.cache
def future_write_seal_supported() -> bool:
    """Whether this kernel knows ``F_SEAL_FUTURE_WRITE`` (5.1 and newer): probed once on a scratch memfd."""
    fd = os.memfd_create("ros2_cuda_ipc-probe", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, F_SEAL_FUTURE_WRITE)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def required_seals() -> int:
    """The seals a reader insists on: size fixed, sealing closed, and future writes refused where the kernel can."""
    return _SIZE_SEALS | fcntl.F_SEAL_SEAL | (F_SEAL_FUTURE_WRITE if future_write_seal_supported() else 0)


def create_sealed(name: str, size: int) -> int:
    """A new memfd of ``size`` bytes (zeroed), sealed so its size never changes; call :func:`seal_writes`
    once the publisher has mapped it writable."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SIZE_SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def seal_writes(fd: int) -> None:
    """Refuse every write that is not through a mapping made before now, and any further seal change.

    Also mode 0444: a writable re-open through ``/proc`` then fails for other users on every kernel
    (the owner could ``chmod`` it back: on kernels before 5.1 a same-user peer can still write).
    """
    os.fchmod(fd, 0o444)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, required_seals())


def read_only_description(fd: int) -> int:
    """A new, read-only open file description of ``fd``'s file (``O_RDONLY`` through ``/proc/self/fd``).

    What a pool hands to each peer: its own description, so the locks a peer takes through it are the
    peer's (they go when the peer does), and one that no ``mmap(PROT_WRITE)`` or ``write`` can use.
    """
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


def check_sealed(fd: int, min_size: int, what: str) -> None:
    """Refuse a peer's fd that could change size under a mapping, that others could still write, or that
    is smaller than it claims."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise InvalidDescriptorError(f"{what} is not a sealed memfd") from None
    if seals & _SIZE_SEALS != _SIZE_SEALS:
        raise InvalidDescriptorError(f"{what} is not sealed against resizing")
    if seals & required_seals() != required_seals():
        raise InvalidDescriptorError(f"{what} is not sealed against writes (F_SEAL_FUTURE_WRITE) and further seals: "
                                     "other readers could rewrite its frames")
    size = os.fstat(fd).st_size
    if size < min_size:
        raise InvalidDescriptorError(f"{what} holds {size} bytes, the pool header promises {min_size}")


def map_fd(fd: int, size: int, writable: bool, offset: int = 0) -> mmap.mmap:
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    return mmap.mmap(fd, size, mmap.MAP_SHARED, prot, offset=offset)
