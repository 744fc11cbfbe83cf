"""How a pool's socket is named, and what a name says about its owner.

Every pool socket carries its publisher's pid and the start of its pool id in its name:
``@ros2_cuda_ipc/<pid>/<pool id>`` (abstract) or ``<socket_dir>/ros2_cuda_ipc-<pid>-<pool id[:16]>.sock``.
So a reader checks a descriptor against its own socket name and against the live processes before it
connects anywhere (a forged descriptor naming the session bus, ssh-agent or X11 costs nothing), and a
publisher can remove the socket files of dead publishers it finds in its ``socket_dir``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from pathlib import Path

log = logging.getLogger("ros2_cuda_ipc")

_ABSTRACT = re.compile(r"@ros2_cuda_ipc/(\d{1,10})/([0-9a-f]{32})")
_FILE = re.compile(r"ros2_cuda_ipc-(\d{1,10})-([0-9a-f]{16})\.sock")


def pool_socket_path(pool_id: bytes, pid: int, socket_dir: str | os.PathLike[str] | None) -> str:
    """The socket name of pool ``pool_id`` published by ``pid``: abstract, or a file in ``socket_dir``."""
    if socket_dir is None:
        return f"@ros2_cuda_ipc/{pid}/{pool_id.hex()}"
    return str(Path(socket_dir).resolve() / f"ros2_cuda_ipc-{pid}-{pool_id.hex()[:16]}.sock")


def socket_owner(socket_path: str) -> tuple[int, str] | None:
    """(publisher pid, pool id hex or its first 16 digits) that a pool socket name states; None if the name is
    not a pool socket's."""
    match = _ABSTRACT.fullmatch(socket_path) or _FILE.fullmatch(os.path.basename(socket_path))
    return (int(match[1]), match[2]) if match else None


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
            if process_alive(owner[0]) and _listening(entry.path):
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
