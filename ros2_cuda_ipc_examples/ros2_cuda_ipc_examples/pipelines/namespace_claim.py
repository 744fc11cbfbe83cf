"""One pipeline run per ROS namespace on this machine, without waiting on discovery.

A run holds a listening abstract Unix socket named after its ROS domain and namespace while it runs; a second
run there fails to bind it, at once, before it starts a node, and learns the first run's pid from the socket
(``SO_PEERCRED``). The kernel frees the name when the run ends, however it ends.

The runner's look at the ROS graph still covers runs on other hosts, as far as discovery finds them within its
second: on a loaded machine it found a run of this host too late, and the second run's nodes, once started,
failed the first run with their reports.
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import struct

__all__ = ["NamespaceTaken", "claim_namespace"]

_MAX_NAME = 107  # an abstract name's bytes after its leading NUL


class NamespaceTaken(Exception):
    """Another run on this machine holds the namespace; ``pid`` is its process (0 when it could not be told)."""

    def __init__(self, namespace: str, pid: int) -> None:
        super().__init__(f"another pipeline runs in {namespace} on this machine (pid {pid or 'unknown'})")
        self.namespace = namespace
        self.pid = pid


def _claim_name(namespace: str) -> str:
    name = f"ros2_cuda_ipc/pipeline/{os.environ.get('ROS_DOMAIN_ID', '0')}/{namespace}"
    if len(name.encode()) > _MAX_NAME:  # a long namespace: its digest, which any run of it computes alike
        name = f"ros2_cuda_ipc/pipeline/{hashlib.sha256(name.encode()).hexdigest()}"
    return "\0" + name


def _holder_pid(name: str) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(name)
            credentials = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return 0
    return int(struct.unpack("3i", credentials)[0])


def claim_namespace(namespace: str) -> socket.socket:
    """The claim on ``namespace`` (close it to give it up), or :class:`NamespaceTaken`."""
    name = _claim_name(namespace)
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        claim.bind(name)
        claim.listen(8)
    except OSError as exc:
        claim.close()
        if exc.errno == errno.EADDRINUSE:
            raise NamespaceTaken(namespace, _holder_pid(name)) from None
        raise
    return claim
