"""The reader's side of the FD handout: connect, check who answers, receive the pool's fds."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable

from .descriptor import Descriptor, socket_address
from .errors import InvalidDescriptorError, PoolUnavailableError
from .fd_server import peer_credentials
from .layout import HEADER_SIZE, PoolHeader

POOL_FD_COUNT = 2  # metadata memfd, block memory


def fetch_pool_fds(desc: Descriptor, allowed_uids: Iterable[int], timeout: float) -> tuple[PoolHeader, list[int]]:
    """Ask the pool named by ``desc`` for its header and fds: (header, [metadata_fd, memory_fd])."""
    address = socket_address(desc.socket_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(address)
            _pid, uid, _gid = peer_credentials(sock)
            if uid not in {os.getuid(), *allowed_uids}:
                raise PoolUnavailableError(
                    f"{desc.pool_name} is served by uid {uid}, neither this user nor allow-listed: not trusted")
            data, fds, flags, _ = socket.recv_fds(sock, HEADER_SIZE + 1, POOL_FD_COUNT + 1)
        except (FileNotFoundError, ConnectionRefusedError):
            raise PoolUnavailableError(f"{desc.pool_name}: nothing listens there (publisher gone?)") from None
        except TimeoutError:
            raise PoolUnavailableError(f"{desc.pool_name} did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise PoolUnavailableError(f"{desc.pool_name}: {exc.strerror or exc}") from None
    try:
        if not data and not fds:
            raise PoolUnavailableError(f"{desc.pool_name} closed the connection without handing out fds "
                                       "(refused: another user? see the publisher's log)")
        if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC) or len(fds) != POOL_FD_COUNT or len(data) != HEADER_SIZE:
            raise InvalidDescriptorError(f"{desc.pool_name} answered {len(data)} bytes and {len(fds)} fds: "
                                         "not a ros2_cuda_ipc pool")
        header = PoolHeader.unpack(data)
        if header.pool_id != desc.pool_id:
            raise InvalidDescriptorError(f"{desc.pool_name} is now pool {header.pool_id.hex()[:8]}: "
                                         "the descriptor's pool is gone")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return header, fds
