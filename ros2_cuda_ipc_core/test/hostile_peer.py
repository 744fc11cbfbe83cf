"""A hostile local peer for the trust-boundary tests (``hostile_peer.py ROLE ARGS...``); prints one JSON line.

Every role imports first and then, given a uid, drops to it (as root), so that it can run as a user made
for the test, who cannot read this workspace or the Python installation.

  attack SOCKET [UID]          take a pool's handout and try every way to write through it
  lock-and-exit SOCKET BLOCK   take the handout, lock a block through the handed-out fd itself, and exit
  connect SOCKET [UID]         take the handout; print the fd count and the header size, or the error
"""

import ctypes
import fcntl
import json
import mmap
import os
import socket
import sys

import numpy as np

from ros2_cuda_ipc_core.descriptor import socket_address
from ros2_cuda_ipc_core.layout import HEADER_SIZE
from ros2_cuda_ipc_core.leases import FIRST_BLOCK_LEASE, lock_request

_libc = ctypes.CDLL(None, use_errno=True)


def become(uid: str | None) -> None:
    if uid is not None:
        os.setgroups([])
        os.setresgid(int(uid), int(uid), int(uid))
        os.setresuid(int(uid), int(uid), int(uid))


def handout(path: str) -> tuple[bytes, list[int]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(socket_address(path))
        data, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
    return data, fds


def outcome(attempt) -> str:
    try:
        attempt()
    except OSError as exc:
        return f"refused ({exc.strerror})"
    return "ALLOWED"


def mprotect_writable(fd: int, size: int) -> None:
    mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
    address = np.frombuffer(mapping, np.uint8).ctypes.data
    if _libc.mprotect(ctypes.c_void_p(address), ctypes.c_size_t(size), mmap.PROT_READ | mmap.PROT_WRITE) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def write_through_reopen(fd: int, size: int) -> None:
    again = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
    try:
        os.pwrite(again, b"x", 0)
    finally:
        os.close(again)


def chmod_and_reopen(fd: int, size: int) -> None:
    os.fchmod(fd, 0o666)
    write_through_reopen(fd, size)


def attack(path: str, uid: str | None = None) -> dict:
    become(uid)
    _, fds = handout(path)
    result: dict = {"uid": os.getuid(), "fds": len(fds)}
    for name, fd in zip(("metadata", "memory"), fds, strict=True):
        size = os.fstat(fd).st_size
        result[name] = {
            "read_only": fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY,
            "mmap_write": outcome(lambda fd=fd, size=size: mmap.mmap(fd, size, mmap.MAP_SHARED,
                                                                     mmap.PROT_READ | mmap.PROT_WRITE)),
            "pwrite": outcome(lambda fd=fd: os.pwrite(fd, b"x", 0)),
            "mprotect_write": outcome(lambda fd=fd, size=size: mprotect_writable(fd, size)),
            "reopen_write": outcome(lambda fd=fd, size=size: write_through_reopen(fd, size)),
            "chmod_reopen_write": outcome(lambda fd=fd, size=size: chmod_and_reopen(fd, size)),
        }
    return result


def lock_and_exit(path: str, block: str) -> dict:
    _, fds = handout(path)
    fcntl.fcntl(fds[0], fcntl.F_OFD_SETLK, lock_request(fcntl.F_RDLCK, FIRST_BLOCK_LEASE + int(block), os.getpid()))
    print(json.dumps({"locked": int(block), "pid": os.getpid()}), flush=True)
    sys.stdin.readline()  # until the test says go
    return {"exiting": True}


def connect(path: str, uid: str | None = None) -> dict:
    become(uid)
    try:
        data, fds = handout(path)
    except OSError as exc:
        return {"error": exc.strerror}
    return {"fds": len(fds), "header": len(data)}


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    print(json.dumps({"attack": attack, "lock-and-exit": lock_and_exit, "connect": connect}[role](*args)), flush=True)
