"""Test support (not shipped): the invariant every fuzzed message must keep, and hypothesis strategies that mix
live values with hostile ones, for BufferCore, GpuImage and GpuPointCloud2 alike.

Each example goes through real CDR (``serialize_message`` / ``deserialize_message``), as a message from any
DDS participant would, and then must give a typed error or a correct read inside its block, leaving no lease
or fd behind and every block of the publisher's pool free to take again.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ros2_cuda_ipc_core.pool.socket_names import pool_socket_path

#: Bounded so that CI stays fast; a run of a few seconds per message type.  The same examples every run
#: (derandomize): each fuzz file's check that both outcomes, read and refused, were drawn must not rest on chance.
FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: A hang guard, not a performance bound: an example takes milliseconds, a hang (a read that waits on a silent
#: peer with no bound) for ever.  5 s, not 1: one example took over 1 s on two cores shared by five busy processes.
HANG_GUARD_S = 5.0

U32, U64 = 2**32 - 1, 2**64 - 1


def uints(bits: int) -> st.SearchStrategy[int]:
    """Unsigned integers of ``bits``, biased to the edges a forger tries."""
    top = 2**bits - 1
    edges = [v for v in (top, top - 1, 2 ** (bits - 1), 2**31, 2**28, 4096) if v <= top]  # what the field can carry
    return st.one_of(st.integers(0, 16), st.sampled_from(edges), st.integers(0, top))


def live_or(live: Any, hostile: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the live value, so that reads get far; otherwise a hostile one."""
    return st.one_of(st.just(live), st.just(live), hostile)


def core_strategy(live_core: Any) -> st.SearchStrategy[dict[str, Any]]:
    """Fields of a BufferCore: each the live core's or a hostile one."""
    return st.fixed_dictionaries({
        "socket_path": live_or(live_core.socket_path, st.one_of(st.text(max_size=120),
                                                                 st.just(pool_socket_path(bytes(16), 1, None)))),
        "pool_id": live_or(bytes(live_core.pool_id), st.binary(min_size=16, max_size=16)),
        "block_id": live_or(live_core.block_id, uints(32)),
        "uid": live_or(live_core.uid, uints(64)),
        "publisher_pid": live_or(live_core.publisher_pid, st.one_of(st.just(0), uints(32))),
        "memory": live_or(live_core.memory, uints(8)),
        "device_id": live_or(live_core.device_id, uints(32)),
        "event_handle": live_or(bytes(live_core.event_handle), st.binary(min_size=64, max_size=64)),
        "byte_size": live_or(live_core.byte_size, uints(64)),
    })


def fill_core(core: Any, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        if name in ("pool_id", "event_handle"):
            value = np.frombuffer(value, np.uint8)
        setattr(core, name, value)


def over_the_wire(msg: Any) -> Any:
    """``msg`` as a subscriber receives it: serialized to CDR and back."""
    from rclpy.serialization import deserialize_message, serialize_message

    return deserialize_message(serialize_message(msg), type(msg))


def open_fds() -> dict[int, str]:
    """This process's open fds and what each points at."""
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile (the listing's own fd among them)
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return fds


def new_fds(before: dict[int, str]) -> dict[int, str]:
    """The fds open now that were not open (to the same thing) in ``before``: what a read left behind.

    Fds that closed meanwhile do not count: an earlier example's objects may be collected during a read.
    """
    return {fd: target for fd, target in open_fds().items() if before.get(fd) != target}


def check_invariant(pool: Any, read: Callable[[], Any], check_read: Callable[[Any], None]) -> str:
    """Run ``read()`` (a fresh reader's read of the fuzzed message) and hold the invariant; what happened.

    ``check_read(view)`` asserts a successful read is correct and inside its block.
    """
    from ros2_cuda_ipc_core import Ros2CudaIpcError, cuda_device_count

    # A fuzzed CUDA descriptor makes the first read initialize the driver, which opens its device files for the
    # process's life (seen on the H200, run 23): initialize it before counting, so only a read's own fds count.
    cuda_device_count()
    gc.collect()  # an earlier example's readers and views go now, not in the middle of this one
    fds = open_fds()
    started = time.monotonic()
    try:
        view = read()
    except Ros2CudaIpcError:
        outcome = "refused"
    else:
        try:
            check_read(view)
        finally:
            view.close()
        del view
        outcome = "read"
    assert time.monotonic() - started < HANG_GUARD_S
    # The pool's FD server lives in this process too: its end of a handout closes when it reads the reader's EOF.
    deadline = time.monotonic() + 5.0
    while new_fds(fds) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not new_fds(fds), f"a read left fds behind: {new_fds(fds)}"
    # No lock on any block but the publisher's own: it can take every block (its pool reuses them at once).
    # Taking them here would make the live descriptors stale; the test takes them all once at its end.
    assert pool.stats()["holders"] == {}, "a read left a lease behind"
    return outcome


def take_every_block(pool: Any) -> None:
    """Assert the publisher can take every block of ``pool`` now, and give them back."""
    blocks = [pool.acquire_for_publish() for _ in range(pool.block_count)]
    try:
        assert all(block is not None for block in blocks), "the publisher cannot take every block back"
    finally:
        for block in blocks:
            if block is not None:
                block.cancel()
