"""One pipeline run per ROS namespace on this machine, without waiting on discovery.

A run holds a listening abstract Unix socket named after its ROS domain and namespace while it runs; a second
run there fails to bind it, at once, before it starts a node, and learns the first run's pid from the socket
(``SO_PEERCRED``). The kernel frees the name when the run ends, however it ends.

The domain is its number, as rcl reads ``ROS_DOMAIN_ID`` (``'96'``, ``' 96'``, ``'+96'`` and ``'96 '`` are one
domain, so one claim); a value rcl would not take is :class:`InvalidDomainId`.

An abstract name has no owner or mode: any user can bind it.  A name held by a process of another user is no run
of this user's (its nodes could not read our pools either): the claim says so in one line and takes the same name
qualified by this user's uid instead, which this user's other runs try next in the same case.

The runner's look at the ROS graph still covers runs on other hosts, as far as discovery finds them within its
second: on a loaded machine it found a run of this host too late, and the second run's nodes, once started,
failed the first run with their reports.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
import struct
import sys
from collections.abc import Callable

__all__ = ["MAX_DOMAIN_ID", "InvalidDomainId", "NamespaceTaken", "claim_namespace", "domain_id"]

_MAX_NAME = 107  # an abstract name's bytes after its leading NUL
_UCRED = struct.Struct("3i")  # pid, uid, gid
MAX_DOMAIN_ID = 232  # the largest domain id whose DDS ports exist (rmw refuses larger ones)
#: What rcl's strtoul(..., 0) reads: spaces, a sign, then hexadecimal (0x), octal (a leading 0) or decimal digits.
_DOMAIN_ID = re.compile(r"\s*\+?(0[xX][0-9a-fA-F]{1,8}|0[0-7]{0,11}|[1-9][0-9]{0,9})\s*", re.ASCII)


class NamespaceTaken(Exception):
    """Another run on this machine holds the namespace; ``pid`` is its process (0 when it could not be told)."""

    def __init__(self, namespace: str, pid: int) -> None:
        super().__init__(f"another pipeline runs in {namespace} on this machine (pid {pid or 'unknown'})")
        self.namespace = namespace
        self.pid = pid


class InvalidDomainId(ValueError):
    """``ROS_DOMAIN_ID`` is no domain number: the message says what it holds and what would do."""


def domain_id(text: str | None = None) -> int:
    """The ROS domain number of ``text`` (default: ``ROS_DOMAIN_ID``; unset or empty: 0), read as rcl reads it."""
    text = os.environ.get("ROS_DOMAIN_ID", "") if text is None else text
    if text == "":
        return 0
    match = _DOMAIN_ID.fullmatch(text)
    if match is None:
        raise InvalidDomainId(f"ROS_DOMAIN_ID={text[:40]!r} is not a domain number (0 to {MAX_DOMAIN_ID})")
    digits = match.group(1)
    number = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8 if digits.startswith("0") else 10)
    if number > MAX_DOMAIN_ID:
        raise InvalidDomainId(f"ROS_DOMAIN_ID={text[:40]!r} is domain {number}, above the largest, {MAX_DOMAIN_ID}")
    return number


def _claim_name(namespace: str, uid: int | None = None) -> str:
    owner = "" if uid is None else f"uid{uid}/"
    name = f"ros2_cuda_ipc/pipeline/{domain_id()}/{owner}{namespace}"
    if len(name.encode()) > _MAX_NAME:  # a long namespace: its digest, which any run of it computes alike
        name = f"ros2_cuda_ipc/pipeline/{hashlib.sha256(name.encode()).hexdigest()}"
    return "\0" + name


def _holder(name: str) -> tuple[int, int | None]:
    """(pid, uid) of the process listening on ``name``; (0, None) where the kernel would not say (not listening)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(name)
            credentials = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        except OSError:
            return 0, None
    pid, uid, _ = _UCRED.unpack(credentials)
    return pid, uid


def _bind(name: str) -> socket.socket | None:
    """A listening socket bound to ``name``, or None when the name is in use."""
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        claim.bind(name)
        claim.listen(8)
    except OSError as exc:
        claim.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    return claim


def _say(line: str) -> None:
    print(f"pipeline: {line}", file=sys.stderr, flush=True)


def claim_namespace(namespace: str, warn: Callable[[str], None] = _say) -> socket.socket | None:
    """The claim on ``namespace`` (close it to give it up), :class:`NamespaceTaken` when a run of this user holds
    it, or :class:`InvalidDomainId`.  A name held by another user's process is said in one line through ``warn``
    and the uid-qualified name claimed instead; None (carry on unclaimed, said too) when that is held by
    another user as well."""
    uid = os.getuid()
    for qualified in (None, uid):
        name = _claim_name(namespace, qualified)
        claim = _bind(name)
        if claim is not None:
            return claim
        pid, holder_uid = _holder(name)
        if holder_uid == uid:
            raise NamespaceTaken(namespace, pid)
        who = f"uid {holder_uid} (pid {pid or 'unknown'})" if holder_uid is not None else "a process that is not listening"
        then = "claiming it under this user's uid instead" if qualified is None else "running without a claim"
        warn(f"the claim of {namespace} on this machine is held by {who}, not by a pipeline of this user: {then}")
    return None
