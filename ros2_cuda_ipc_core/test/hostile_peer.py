"""A hostile local peer for the trust-boundary tests (``hostile_peer.py ROLE ARGS...``); prints one JSON line.

Every role imports first and then, given a uid, drops to it (as root), so that it can run as a user made
for the test, who cannot read this workspace or the Python installation.

  attack SOCKET [UID]          take a pool's handout and try every way to write through it
  lock-and-exit SOCKET BLOCK   take the handout, lock a block through the handed-out fd itself, and exit
  connect SOCKET [UID]         take the handout; print the fd count and the header size, or the error
  fork-reader                  read the descriptor on stdin, fork a child that sleeps, print both pids, wait
  fork-publisher               publish one block, fork a child that sleeps, print the descriptor and pids, wait
  exit-holding                 read the descriptor on stdin and exit with the handle and a view still open
  starved-publisher            make a pool, use up this process's fds, on a line from stdin free them, print stats
  read-with-free-fds N         read the descriptor on stdin with only N fds free; print the error
  squat POOL_ID VICTIM_PID DIR serve pools under the victim's (public) pool id with "HACKED" in every block: one
                               at its own abstract socket, one whose socket file, header and descriptors name the
                               victim's pid; print their descriptors (one claiming the victim's pid), then wait
"""

import ctypes
import fcntl
import json
import logging
import mmap
import os
import resource
import socket
import sys
import time

import numpy as np

from ros2_cuda_ipc_core.memory.layout import HEADER_SIZE
from ros2_cuda_ipc_core.pool.descriptor import socket_address
from ros2_cuda_ipc_core.pool.leases import FIRST_BLOCK_LEASE, lock_request

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
    except (OSError, ValueError) as exc:  # ValueError: Python's mmap of a 0-byte (CUDA export) fd
        return f"refused ({getattr(exc, 'strerror', None) or exc})"
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


def read_stdin_core():
    from core_peer import core_from_json

    return core_from_json(sys.stdin.readline())


def fork_reader() -> dict:
    from ros2_cuda_ipc_core import Reader

    handle = Reader().read(read_stdin_core())
    child = fork_and_sleep()
    say({"reader": os.getpid(), "child": child, "block": handle.block_id})
    time.sleep(60)
    return {}


def say(line: dict) -> None:
    """One JSON line in one write: a forked child and its parent share the pipe."""
    os.write(1, (json.dumps(line) + "\n").encode())


def fork_and_sleep() -> int:
    """Fork a child that says when it runs (the fork hooks have run by then) and sleeps; its pid."""
    child = os.fork()
    if child == 0:
        say({"child_running": os.getpid()})
        time.sleep(60)
        os._exit(0)
    return child


def fork_publisher() -> dict:
    from core_peer import core_to_json

    from ros2_cuda_ipc_core import BlockManager

    pool = BlockManager(4096, block_count=1, memory="host", reuse_delay=0)
    core = pool.acquire_for_publish().prepare_publish()
    child = fork_and_sleep()
    say({"publisher": os.getpid(), "child": child})
    os.write(1, (core_to_json(core) + "\n").encode())
    time.sleep(60)
    return {}


def exit_holding() -> dict:
    from ros2_cuda_ipc_core import Reader

    handle = Reader().read(read_stdin_core())
    exit_holding.kept = (handle, handle.view((16,), np.uint8))  # alive until the interpreter ends
    return {"held": handle.block_id}


def fill_fds() -> list[int]:
    fds = []
    try:
        while True:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        return fds


def starved_publisher() -> dict:
    from ros2_cuda_ipc_core import BlockManager

    logging.basicConfig(level=logging.INFO)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    pool = BlockManager(4096, block_count=1, memory="host")
    filler = fill_fds()
    print(json.dumps({"socket": pool.socket_path, "filled": len(filler)}), flush=True)
    sys.stdin.readline()  # the test has connected: the server now fails to accept it
    time.sleep(0.5)
    for fd in filler:
        os.close(fd)
    deadline = time.monotonic() + 30
    while pool.stats()["fd_handouts"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return pool.counters.snapshot()


def read_with_free_fds(free: str) -> dict:
    from ros2_cuda_ipc_core import Reader, Ros2CudaIpcError

    core = read_stdin_core()
    reader = Reader()
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    filler = fill_fds()
    for fd in filler[len(filler) - int(free):]:
        os.close(fd)
    try:
        reader.read(core).close()
    except Ros2CudaIpcError as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    except Exception as exc:  # what the test is about: anything untyped
        return {"error": type(exc).__name__, "message": str(exc), "untyped": True}
    return {"error": None}


def squat(pool_id: str, victim_pid: str, socket_dir: str, victim_pid_namespace: str = "") -> dict:
    from core_peer import core_to_json

    from ros2_cuda_ipc_core import BlockManager
    from ros2_cuda_ipc_core.pool import socket_names


    victim_id = bytes.fromhex(pool_id)
    urandom, getpid = os.urandom, os.getpid
    os.urandom = lambda n: victim_id if n == 16 else urandom(n)  # the pool id is public: any process can reuse it
    try:
        own = BlockManager(1 << 20, block_count=2, memory="host", reuse_delay=0)
        os.getpid = lambda: int(victim_pid)  # its socket's name, header and descriptors all say the victim's pid
        if victim_pid_namespace:  # in a pid namespace of its own, its socket's name claims the victim's too
            socket_names.own_pid_namespace = lambda: int(victim_pid_namespace)
        named_as_victim = BlockManager(1 << 20, block_count=2, memory="host", reuse_delay=0, socket_dir=socket_dir)
    finally:
        os.urandom, os.getpid = urandom, getpid
    cores = {}
    for name, pool in (("own", own), ("named_as_victim", named_as_victim)):
        block = pool.acquire_for_publish()
        block.view((1 << 20,), np.uint8)[:] = np.frombuffer(b"HACKED!!" * (1 << 17), np.uint8)
        cores[name] = json.loads(core_to_json(block.prepare_publish()))
    cores["claims_victim"] = {**cores["own"], "publisher_pid": int(victim_pid)}
    say({name: json.dumps(core) for name, core in cores.items()})
    time.sleep(600)
    return {}


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    roles = {"attack": attack, "lock-and-exit": lock_and_exit, "connect": connect, "fork-reader": fork_reader,
             "fork-publisher": fork_publisher, "exit-holding": exit_holding, "starved-publisher": starved_publisher,
             "read-with-free-fds": read_with_free_fds, "squat": squat}
    print(json.dumps(roles[role](*args)), flush=True)
