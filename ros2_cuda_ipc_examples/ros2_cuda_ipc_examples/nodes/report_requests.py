"""Report requests from the pipeline runner, over a pipe only the runner holds (the child's side).

The runner (``pipelines/runner.py``) starts each child with the read end of an ``os.pipe()`` and names its number in
:data:`REPORT_REQUESTS_VARIABLE`; it writes a line, a node's fully qualified name or ``*`` (every node), when it
wants a report now.  It used to publish the name on a DDS topic: any participant in the domain could flood that,
and every message cost every node an executor wake-up and a deserialisation, however few reports it then sent.

One daemon thread a process reads the pipe and calls ``trigger`` (it sets a flag the node's timer looks at) of each
node registered under the name read: a composed container holds several nodes, a component restarted in place registers
again.  The node then reports on its own executor thread.  A node started by a user has no such variable, no
thread and nothing to read.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator

__all__ = ["ALL_NODES", "MAX_LINE_BYTES", "REPORT_REQUESTS_VARIABLE", "ChannelError", "Registration", "register",
           "request_lines"]

#: The environment variable naming the read end's file descriptor (decimal) in a child the runner started.
REPORT_REQUESTS_VARIABLE = "ROS2_CUDA_IPC_REPORT_REQUESTS"
#: The line that asks every node of the process.
ALL_NODES = "*"
#: A longer line is dropped whole (a fully qualified node name is far shorter): the reader holds at most this much.
MAX_LINE_BYTES = 1024
_CHUNK = 4096


class ChannelError(ValueError):
    """The variable is set but names no pipe this process can read (a user's mistake, or a stale environment)."""


class Registration:
    """A node's place in the process's registry; :meth:`close` (in ``destroy_node``) takes it out: once it returns,
    its trigger is not called again."""

    def __init__(self, name: str, trigger: Callable[[], None]) -> None:
        self.name, self.trigger = name, trigger

    def close(self) -> None:
        with _lock:
            if self in _registered:
                _registered.remove(self)


_lock = threading.Lock()
_registered: list[Registration] = []
_channel: int | None = None  # the fd once opened (the thread may have ended since: EOF, the runner is gone)


def register(name: str, trigger: Callable[[], None]) -> Registration | None:
    """Call ``trigger`` (from the reader thread) whenever the runner asks for ``name``'s report; the first call in
    a process starts that thread.  None when the process has no channel (not started by the runner).

    Raises :class:`ChannelError` when the variable is set but unusable; the node then just has no channel."""
    global _channel
    with _lock:
        if _channel is None:
            fd = _channel_from_environment()
            if fd is None:
                return None
            _channel = fd
            threading.Thread(target=_read, args=(fd,), name="report-requests", daemon=True).start()
        registration = Registration(name, trigger)
        _registered.append(registration)
        return registration


def _channel_from_environment() -> int | None:
    """The pipe's read end, taken out of the environment, made non-inheritable (a process this one starts must not
    read a number that names another file there) and blocking; None when the variable is not set.

    Only a read-only pipe above the standard streams is taken: a stale or mistaken number could name this process's
    stdin or stdout (a pipe when it runs under ``| tee``) or another pipe's write end, which the reader would then
    close when its reading fails."""
    text = os.environ.pop(REPORT_REQUESTS_VARIABLE, None)
    if text is None:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 6):
        raise ChannelError(f"{REPORT_REQUESTS_VARIABLE}={text[:20]!r} is not a file descriptor number")
    fd = int(text)
    if fd < 3:
        raise ChannelError(f"{REPORT_REQUESTS_VARIABLE}={fd} is a standard stream, not the runner's pipe")
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise ChannelError(f"{REPORT_REQUESTS_VARIABLE}={fd} is not a pipe")
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:
            raise ChannelError(f"{REPORT_REQUESTS_VARIABLE}={fd} is not a pipe's read end")
        os.set_inheritable(fd, False)
        os.set_blocking(fd, True)
    except OSError as exc:
        raise ChannelError(f"{REPORT_REQUESTS_VARIABLE}={fd}: {exc.strerror}") from None
    return fd


def request_lines(chunks: Iterator[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of ``chunks`` (a byte stream cut anywhere), each a name: a line longer than ``limit`` is dropped up
    to its newline, one that is not UTF-8, empty or holds a control character is dropped; an unended last line too
    (the writer died in it).  Memory: at most ``limit`` plus one chunk."""
    pending = b""
    overlong = False  # inside a line already longer than limit: skip to its newline
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if not overlong:
                name = _name(line, limit)
                if name is not None:
                    yield name
            overlong = False
        if len(pending) > limit:
            pending, overlong = b"", True


def _name(line: bytes, limit: int) -> str | None:
    if not line or len(line) > limit:
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text) else text


def _chunks(fd: int) -> Iterator[bytes]:
    """What the pipe gives until EOF (the runner closed it or died) or an error, which is said once: the node then
    reports on its timer only, and a runner's last reports may be a second old."""
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except InterruptedError:
            continue
        except OSError as exc:
            logging.getLogger(__name__).warning("report requests: reading the runner's pipe failed (%s); no more "
                                                "requests are read", exc.strerror)
            return
        if not chunk:
            return
        yield chunk


def _read(fd: int) -> None:
    """The reader thread: each line read triggers the nodes it names, until EOF; then the pipe is closed."""
    try:
        for name in request_lines(_chunks(fd)):
            with _lock:
                for registration in _registered:
                    if name in (ALL_NODES, registration.name):
                        with contextlib.suppress(Exception):  # a node whose start failed: it reports no more anyway
                            registration.trigger()
    finally:
        os.close(fd)
