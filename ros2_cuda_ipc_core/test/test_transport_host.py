"""Pool and reader behaviour on host memory, within one process."""

import os
import threading
import time

import numpy as np
import pytest
from through_socket import through_socket

from ros2_cuda_ipc_core import (
    BlockManager,
    InvalidDescriptorError,
    PoolUnavailableError,
    Reader,
    Ros2CudaIpcError,
    StaleDescriptorError,
)


@pytest.fixture
def pool():
    with BlockManager(10_000, block_count=2, memory="host", reuse_delay=0) as pool:
        yield pool


def publish(pool, value, byte_size=None):
    block = pool.acquire_for_publish()
    assert block is not None
    block.view((pool.block_size,), np.uint8)[:] = value
    return block.prepare_publish(byte_size=byte_size)


def test_properties_and_rounding(pool):
    assert pool.memory == "host" and pool.block_count == 2
    assert pool.block_size == 12288  # rounded up to whole pages
    assert pool.socket_path.startswith("@ros2_cuda_ipc/")
    assert len(pool.pool_id) == 16


def test_read_sees_the_published_bytes_read_only(pool):
    core = publish(pool, 42, byte_size=1000)
    with Reader().read(core) as handle:
        assert (handle.byte_size, handle.memory, handle.device_id) == (1000, "host", 0)
        view = handle.view((10, 100), np.uint8)
        assert view.shape == (10, 100) and (view == 42).all()
        assert not view.flags.writeable
        with pytest.raises(ValueError):
            view[0, 0] = 1
        assert handle.device_ptr == view.ctypes.data
        with pytest.raises(InvalidDescriptorError):
            handle.view((1001,), np.uint8)  # beyond the payload, though inside the block


def test_views_keep_the_lease_after_close(pool):
    reader = Reader()
    core = publish(pool, 1)
    handle = reader.read(core)
    view = handle.view((8,), np.uint8)
    handle.close()
    assert pool.stats()["blocks_held_by_readers"] == 1  # the view still holds it
    sliced = view[2:]
    del view
    assert pool.stats()["blocks_held_by_readers"] == 1  # a slice keeps its base alive
    del sliced
    assert pool.stats()["blocks_held_by_readers"] == 0
    with pytest.raises(Ros2CudaIpcError):
        handle.view((8,), np.uint8)


def test_a_view_taken_while_its_handle_closes_holds_the_lease(pool):
    """close() on one thread while view() runs on another: the view holds the lease or is refused, never
    outlives it.  Made deterministic here: the view's own shape closes the handle while the view is made."""
    handle = Reader().read(publish(pool, 1))

    class ClosingExtent:
        def __index__(self):
            handle.close()
            return 8

    view = handle.view((ClosingExtent(),), np.uint8)
    assert handle.closed and pool.stats()["blocks_held_by_readers"] == 1  # the view holds it
    del view
    assert pool.stats()["blocks_held_by_readers"] == 0


def test_a_view_refused_for_its_layout_takes_no_share(pool):
    handle = Reader().read(publish(pool, 1))
    with pytest.raises(InvalidDescriptorError):
        handle.view((pool.block_size + 1,), np.uint8)
    handle.close()
    assert pool.stats()["blocks_held_by_readers"] == 0


def test_reused_block_makes_descriptor_stale(pool):
    reader = Reader()
    old = publish(pool, 1)
    publish(pool, 2)
    publish(pool, 3)  # the least recently published block is reused: old's block
    with pytest.raises(StaleDescriptorError, match="fell behind"):
        reader.read(old)
    assert reader.stats()["stale_drops"] == 1
    assert reader.stats()["leases_held"] == 0


def test_block_being_written_makes_descriptor_stale(pool):
    reader = Reader()
    core = publish(pool, 1)
    publish(pool, 2)
    rewriting = pool.acquire_for_publish()
    assert rewriting.block_id == core.block_id
    with pytest.raises(StaleDescriptorError, match="being rewritten"):
        reader.read(core)
    rewriting.cancel()
    with pytest.raises(StaleDescriptorError):
        reader.read(core)  # a cancelled rewrite still bumped the uid
    assert reader.stats()["stale_drops"] == 2


def test_same_process_read_holds_a_lease(pool):
    reader = Reader()
    core = publish(pool, 5)
    assert core.publisher_pid == os.getpid()
    with reader.read(core):
        assert reader.stats()["same_process_reads"] == 1
        assert reader.stats()["gpu_waits"] == 0  # a host block is complete when published: nothing to wait for
        assert pool.stats()["blocks_held_by_readers"] == 1
        other = pool.acquire_for_publish()
        assert other is not None and other.block_id != core.block_id  # the leased block is skipped
        assert pool.acquire_for_publish() is None
        other.cancel()
    assert pool.stats()["blocks_held_by_readers"] == 0


def test_several_handles_share_one_lease(pool):
    reader = Reader()
    core = publish(pool, 5)
    first, second = reader.read(core), reader.read(core)
    first.close()
    assert pool.stats()["blocks_held_by_readers"] == 1
    second.close()
    assert pool.stats()["blocks_held_by_readers"] == 0


def test_acquire_returns_none_at_once_when_all_blocks_are_leased(pool, monkeypatch):
    reader = Reader()
    handles = [reader.read(publish(pool, i)) for i in range(2)]
    with monkeypatch.context() as patch:
        patch.setattr(time, "sleep", lambda seconds: pytest.fail(f"acquire without a timeout slept {seconds} s"))
        assert pool.acquire_for_publish() is None  # at once: not a single pause
    assert pool.acquire_for_publish(timeout=0.2) is None
    assert pool.stats()["acquire_misses"] == 2

    # A lease given back while acquire waits is noticed: the block comes back, after the release, well
    # within the timeout (a generous one: on a loaded machine the timer thread may run late).
    threading.Timer(0.05, handles[1].close).start()
    started = time.monotonic()
    block = pool.acquire_for_publish(timeout=30.0)
    waited = time.monotonic() - started
    assert block is not None and block.block_id == 1
    assert waited > 0.03  # it did wait for the release
    block.cancel()
    handles[0].close()


def test_reuse_delay_protects_fresh_blocks():
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0.2) as pool:
        publish(pool, 1)
        publish(pool, 2)
        assert pool.acquire_for_publish() is None
        block = pool.acquire_for_publish(timeout=1.0)
        assert block is not None
        block.cancel()


def test_context_manager_cancels_unpublished_block(pool):
    with pool.acquire_for_publish() as block:
        first = block.block_id
    assert pool.stats()["cancelled"] == 1
    again = pool.acquire_for_publish()
    assert again.block_id == first  # reusable at once
    again.cancel()
    with pytest.raises(Ros2CudaIpcError):
        again.prepare_publish()


def test_publish_rejects_bad_byte_size(pool):
    block = pool.acquire_for_publish()
    for bad in (0, pool.block_size + 1):
        with pytest.raises(ValueError):
            block.prepare_publish(byte_size=bad)
    block.cancel()


def test_closing_pool_keeps_readers_mappings(pool):
    reader = Reader()
    core = publish(pool, 77)
    handle = reader.read(core)
    view = handle.view((pool.block_size,), np.uint8)
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 1.0
    assert (view == 77).all()
    handle.close()
    del view


def test_closed_pool_refuses_new_readers():
    pool = BlockManager(4096, block_count=1, memory="host")
    core = through_socket(publish(pool, 1))  # as another process reads it: the socket path
    pool.close()
    with pytest.raises(PoolUnavailableError):
        Reader().read(core)


def test_remote_path_imports_once_and_sees_pool_close():
    pool = BlockManager(4096, block_count=2, memory="host", reuse_delay=0)
    reader = Reader()
    for value in range(4):
        core = through_socket(publish(pool, value))
        with reader.read(core) as handle:
            assert handle.view((4096,), np.uint8)[0] == value
    stats = reader.stats()
    assert (stats["imports"], stats["reads"], stats["same_process_reads"]) == (1, 4, 0)
    deadline = time.monotonic() + 10  # the server thread counts a handout after sending it: the reader may be first
    while pool.stats()["fd_handouts"] == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert pool.stats()["fd_handouts"] == 1
    pool.close()
    with pytest.raises(PoolUnavailableError, match="gone"):
        reader.read(core)
    assert reader.stats()["pools_cached"] == 0


def test_file_socket_is_private_and_removed(short_tmp_path):
    pool = BlockManager(4096, block_count=1, memory="host", socket_dir=short_tmp_path)
    path = pool.socket_path
    assert path.startswith(str(short_tmp_path)) and os.stat(path).st_mode & 0o777 == 0o600
    core = through_socket(publish(pool, 9))
    with Reader().read(core) as handle:
        assert handle.view((1,), np.uint8)[0] == 9
    pool.close()
    assert not os.path.exists(path)


def test_reader_cache_is_bounded():
    reader = Reader(max_pools=2)
    pools = [BlockManager(4096, block_count=1, memory="host") for _ in range(4)]
    for pool in pools:
        core = through_socket(publish(pool, 1))
        reader.read(core).close()
    assert reader.stats()["pools_cached"] == 2
    assert reader.stats()["evictions"] == 2
    for pool in pools:
        pool.close()


def test_bad_arguments():
    with pytest.raises(ValueError):
        BlockManager(0)
    with pytest.raises(ValueError):
        BlockManager(10, memory="gpu")
    with pytest.raises(ValueError):
        BlockManager(10, reuse_delay=-1)


def test_concurrent_publishers_and_readers_share_a_pool_safely():
    """rclpy's MultiThreadedExecutor may publish and read from several threads at once."""
    from concurrent.futures import ThreadPoolExecutor

    with BlockManager(4096, block_count=8, memory="host", reuse_delay=0) as pool:
        reader = Reader()
        seen_uids = []

        def publish_and_read(value):
            block = pool.acquire_for_publish(timeout=2.0)
            assert block is not None
            block.view((4096,), np.uint8)[:] = value
            core = block.prepare_publish()
            seen_uids.append(core.uid)
            try:
                with reader.read(core) as handle:
                    return int(handle.view((4096,), np.uint8)[0]) == value
            except StaleDescriptorError:
                return True  # another thread reused the block first: legal, and detected

        with ThreadPoolExecutor(8) as threads:
            results = list(threads.map(publish_and_read, [i % 256 for i in range(400)]))
        assert all(results)
        assert len(set(seen_uids)) == 400  # every publication got its own uid
        assert pool.stats()["published"] == 400 and reader.stats()["leases_held"] == 0


def test_prepare_publish_fills_the_core_it_is_given():
    from ros2_cuda_ipc_msgs.msg import BufferCore

    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = BufferCore()
        block = pool.acquire_for_publish()
        assert block.prepare_publish(byte_size=10, into=core) is core
        assert (core.block_id, core.byte_size, bytes(core.pool_id)) == (block.block_id, 10, pool.pool_id)
        with Reader().read(core) as handle:
            assert handle.byte_size == 10


def test_prepare_publish_into_something_else_leaves_the_block_borrowed():
    from ros2_cuda_ipc_msgs.msg import BufferCore

    with BlockManager(4096, block_count=1, memory="host", reuse_delay=60.0) as pool:
        block = pool.acquire_for_publish()
        with pytest.raises(TypeError, match="into= takes a BufferCore"):
            block.prepare_publish(into=object())
        core = block.prepare_publish(byte_size=10)  # still borrowed: nothing was published by the failed call
        assert isinstance(core, BufferCore) and core.byte_size == 10
        assert pool.stats()["published"] == 1
