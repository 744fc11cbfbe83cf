"""Hostile input: malformed descriptors and pool sockets that answer garbage never crash, hang or over-map."""

import dataclasses
import os
import socket
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from setters import unchecked
from through_socket import socket_only

from ros2_cuda_ipc_core import BlockManager, InvalidDescriptorError, Reader, Ros2CudaIpcError
from ros2_cuda_ipc_core.pool.descriptor import Descriptor, socket_address
from ros2_cuda_ipc_core.pool.socket_names import pool_socket_path
from ros2_cuda_ipc_msgs.msg import BufferCore

HYPOTHESIS = settings(max_examples=150, deadline=1000, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def live():
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        block = pool.acquire_for_publish()
        block.view((4096,), np.uint8)[:] = 1
        yield pool, block.prepare_publish()


def copy_core(core: BufferCore, **changes) -> BufferCore:
    out = unchecked(BufferCore)  # a wrong-length fixed array cannot come off the wire: built in-process
    for name in ("socket_path", "block_id", "uid", "publisher_pid", "memory", "device_id", "byte_size"):
        setattr(out, name, changes.get(name, getattr(core, name)))
    out.pool_id = np.asarray(changes.get("pool_id", core.pool_id), dtype=np.uint8)
    out.event_handle = np.asarray(changes.get("event_handle", core.event_handle), dtype=np.uint8)
    return out


def read_within_a_second(reader: Reader, core: BufferCore) -> None:
    started = time.monotonic()
    try:
        with reader.read(core) as handle:
            view = handle.view((handle.byte_size,), np.uint8)
            assert handle.byte_size <= 4096 and view.nbytes <= 4096  # never beyond the pool
    except Ros2CudaIpcError:
        pass
    assert time.monotonic() - started < 1.0


@HYPOTHESIS
@given(block_id=st.integers(0, 2**32 - 1), uid=st.integers(0, 2**64 - 1), byte_size=st.integers(0, 2**64 - 1),
       memory=st.integers(0, 255), device_id=st.integers(0, 2**32 - 1), remote=st.booleans())
def test_random_fields_of_a_live_pool(live, block_id, uid, byte_size, memory, device_id, remote):
    _, core = live
    bad = copy_core(core, block_id=block_id, uid=uid, byte_size=byte_size, memory=memory, device_id=device_id)
    if remote:
        with socket_only(bad):
            read_within_a_second(Reader(), bad)
    else:
        read_within_a_second(Reader(), bad)


@HYPOTHESIS
@given(pool_id=st.binary(min_size=16, max_size=16), socket_path=st.text(max_size=200))
def test_random_pool_ids_and_socket_paths(live, pool_id, socket_path):
    _, core = live
    for path in (socket_path, "@" + socket_path, core.socket_path):
        read_within_a_second(Reader(connect_timeout=0.3), copy_core(core, pool_id=np.frombuffer(pool_id, np.uint8),
                                                                   socket_path=path))


@pytest.mark.parametrize("field,value", [
    ("block_id", 2), ("byte_size", 4097), ("byte_size", 0), ("memory", 7), ("device_id", 1),
    ("socket_path", "relative/path"), ("socket_path", "@"), ("socket_path", "@" + "x" * 200),
    ("socket_path", "@bad\x00name"), ("pool_id", np.zeros(15, np.uint8)), ("event_handle", np.zeros(3, np.uint8)),
])
def test_each_bad_field_is_named(live, field, value):
    _, core = live
    reader = Reader()
    try:
        bad = copy_core(core, **{field: value})
    except AssertionError:
        pytest.skip("this distro's message setters refuse the value themselves (Humble)")
    with pytest.raises(InvalidDescriptorError) as info:
        reader.read(bad)
    assert field.split("_")[0] in str(info.value) or "memory" in str(info.value)
    assert reader.stats()["invalid_descriptors"] == 1 and reader.stats()["leases_held"] == 0


def test_cuda_descriptor_for_a_host_pool(live):
    """A descriptor's 'cuda' is its own claim: the pool's header says host, so it is a bad descriptor on any
    machine, never 'no CUDA here' (which would send the genuine publisher's frames to its twin for good)."""
    _, core = live
    with pytest.raises(InvalidDescriptorError, match="descriptor says cuda memory"):
        Reader().read(copy_core(core, memory=1))
    with socket_only(core), pytest.raises(InvalidDescriptorError, match="descriptor says cuda memory"):
        Reader().read(copy_core(core, memory=1))


def test_not_a_message_at_all():
    with pytest.raises(InvalidDescriptorError):
        Reader().read(object())
    with pytest.raises(InvalidDescriptorError):
        Descriptor.from_message(type("Fake", (), {n: "x" for n in Descriptor.FIELDS})())


class FakePool:
    """A socket named as a pool's (pool ``pool_id``, of this process) that answers whatever the test says."""

    pool_id = bytes(range(16))

    def __init__(self, answer: bytes, fds: list[int], close_early: bool = False, silent: bool = False) -> None:
        self.path = pool_socket_path(self.pool_id, os.getpid(), None)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(socket_address(self.path))
        self.sock.listen(4)
        self.answer, self.fds, self.close_early, self.silent = answer, fds, close_early, silent
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            if self.silent:
                time.sleep(1.5)
            elif not self.close_early:
                socket.send_fds(conn, [self.answer], self.fds) if self.fds else conn.sendall(self.answer)

    def core(self, core: BufferCore) -> BufferCore:
        """``core`` naming this fake pool."""
        return copy_core(core, socket_path=self.path, pool_id=np.frombuffer(self.pool_id, np.uint8),
                         publisher_pid=os.getpid())

    def close(self) -> None:
        self.sock.close()


def some_fds(sizes: list[int]) -> list[int]:
    fds = []
    for size in sizes:
        fd = os.memfd_create("fake")  # not sealed: a reader must refuse to map it
        os.ftruncate(fd, size)
        fds.append(fd)
    return fds


@HYPOTHESIS
@given(answer=st.binary(min_size=1, max_size=120), nfds=st.integers(0, 3))
def test_socket_answering_garbage(live, answer, nfds):
    _, core = live
    fds = some_fds([1 << 20] * nfds)
    fake = FakePool(answer, fds)
    try:
        read_within_a_second(Reader(), fake.core(core))
    finally:
        fake.close()
        for fd in fds:
            os.close(fd)


def test_socket_replaying_a_real_header_with_unsealed_fds(live):
    pool, core = live
    fds = some_fds([4096, 8192])  # the header promises 2 x 4096 bytes but the fds are not sealed
    fake = FakePool(dataclasses.replace(pool.header, pool_id=FakePool.pool_id).pack(), fds)
    try:
        with pytest.raises(InvalidDescriptorError, match="sealed"):
            Reader().read(fake.core(core))
    finally:
        fake.close()
        for fd in fds:
            os.close(fd)


@pytest.mark.parametrize("behaviour", ["close_early", "silent"])
def test_socket_closing_early_or_never_answering(live, behaviour):
    _, core = live
    fake = FakePool(b"", [], **{behaviour: True})
    reader = Reader(connect_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(Ros2CudaIpcError):
        reader.read(fake.core(core))
    assert time.monotonic() - started < 1.0
    fake.close()


def test_an_already_made_descriptor_naming_an_unknown_memory_is_refused_by_name():
    """A ``Descriptor`` skips ``from_message``'s checks (the direct path and a subscription's templates make them
    from bounded fields): a memory the pool does not hold is still an InvalidDescriptorError, not a KeyError that
    would leave the read through the executor (a forged template once made one: decisions.md)."""
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = pool.acquire_for_publish().prepare_publish()
        made = Descriptor.from_message(core)
        made.memory = 7
        with pytest.raises(InvalidDescriptorError, match="descriptor says 7 memory"):
            Reader().read(made)
