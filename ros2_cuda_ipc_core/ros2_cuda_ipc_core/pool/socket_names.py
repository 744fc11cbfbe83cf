"""How a pool's socket is named, and what a name says about its owner.

Every pool socket carries its publisher's pid, the pid namespace that pid is numbered in (the namespace's
inode, as ``/proc/self/ns/pid`` names it), and the start of its pool id in its name:
``@ros2_cuda_ipc/<pid>.<pid ns>/<pool id>`` (abstract) or
``<socket_dir>/ros2_cuda_ipc-<pid>.<pid ns>-<pool id[:16]>.sock``.
So a reader checks a descriptor against its own socket name, and against the live processes where the
publisher shares its pid namespace, before it connects anywhere (a forged descriptor naming the session bus,
ssh-agent or X11 costs nothing); after connecting it holds the server to both numbers (:mod:`.peer_identity`),
and a publisher can remove the socket files of dead publishers it finds in its ``socket_dir``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger("ros2_cuda_ipc")

_ABSTRACT = re.compile(r"@ros2_cuda_ipc/([0-9]{1,10})\.([0-9]{1,20})/([0-9a-f]{32})")
_FILE = re.compile(r"ros2_cuda_ipc-([0-9]{1,10})\.([0-9]{1,20})-([0-9a-f]{16})\.sock")
_NO_NAMESPACE = 0  # /proc/self/ns/pid unreadable (no /proc): a name that says so is checked as this namespace's


class SocketOwner(NamedTuple):
    """What a pool socket's name states about its publisher."""

    pid: int  #: the publisher's pid, as its own pid namespace numbers it
    pool_hex: str  #: the pool id in hex, or its first 16 digits (a socket file's name)
    pid_namespace: int  #: the inode of that pid namespace (0: the publisher could not read it)

    @property
    def in_this_pid_namespace(self) -> bool:
        """Whether the pid is numbered as this process numbers pids (or no namespace is known on either side)."""
        return self.pid_namespace in (own_pid_namespace(), _NO_NAMESPACE)


def own_pid_namespace() -> int:
    """The inode of this process's pid namespace; 0 where ``/proc`` cannot say.  Read each time: cheap, and a
    forked child of ``unshare --pid`` lives in another one than its parent."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return _NO_NAMESPACE


def pool_socket_path(pool_id: bytes, pid: int, socket_dir: str | os.PathLike[str] | None) -> str:
    """The socket name of pool ``pool_id`` published by ``pid`` (of this process's pid namespace): abstract, or a
    file in ``socket_dir``."""
    owner = f"{pid}.{own_pid_namespace()}"
    if socket_dir is None:
        return f"@ros2_cuda_ipc/{owner}/{pool_id.hex()}"
    return str(Path(socket_dir).resolve() / f"ros2_cuda_ipc-{owner}-{pool_id.hex()[:16]}.sock")


def socket_owner(socket_path: str) -> SocketOwner | None:
    """What a pool socket name states (publisher pid, pool id, pid namespace); None if it is not a pool socket's."""
    match = _ABSTRACT.fullmatch(socket_path) or _FILE.fullmatch(os.path.basename(socket_path))
    return SocketOwner(int(match[1]), match[3], int(match[2])) if match else None


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists in this pid namespace (another user's counts: EPERM)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_sockets(socket_dir: str | os.PathLike[str]) -> int:
    """Unlink this user's pool socket files in ``socket_dir`` whose publisher is dead or that nobody listens on
    (a SIGKILLed publisher leaves its file); the number removed."""
    removed = 0
    with contextlib.suppress(OSError), os.scandir(socket_dir) as entries:
        for entry in entries:
            owner = socket_owner(entry.name)
            if owner is None or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            # Another pid namespace's publisher (a container sharing the directory) is judged by its socket alone.
            if (not owner.in_this_pid_namespace or process_alive(owner.pid)) and _listening(entry.path):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed += 1
    if removed:
        log.info("removed %d stale pool socket file(s) of dead publishers from %s", removed, socket_dir)
    return removed


def _listening(path: str) -> bool:
    """Whether something accepts connections at ``path`` (a live pid may be a reused one)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK) as probe:
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:  # EAGAIN: a full backlog is someone listening
            return True
    return True
