"""Test support (not shipped): read this process's own pool through its socket, as another process's reader does.

A reader in the publishing process normally takes the same-process path (the pool's own mapping).  Tests of the
handout and of the socket's checks need the other path without another process: :func:`through_socket` hides
the pool from that path, so a ``Reader`` here imports it through its socket like any other peer.  The
descriptor stays genuine (its publisher pid is this process's, as its socket's name says).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ros2_cuda_ipc_core.pool import block_manager as pool_module


def through_socket(core: Any) -> Any:
    """``core`` as it is, its pool no longer found by the same-process path of this process's readers."""
    pool_module.local_pools.pop(bytes(core.pool_id), None)
    return core


@contextmanager
def socket_only(core: Any) -> Iterator[Any]:
    """:func:`through_socket` for the block only: the pool is found by the same-process path again afterwards."""
    key = bytes(core.pool_id)
    pool = pool_module.local_pools.pop(key, None)
    try:
        yield core
    finally:
        if pool is not None and not pool.closed:
            pool_module.local_pools[key] = pool
