"""Lifetimes on host memory: closed pools give back fds and mappings, readers forget closed or dead pools,
and no error inside read() leaves a lease behind."""

import gc
import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from core_peer import core_from_json, core_to_json, resource_counts
from peers import ask, spawn_peer
from through_socket import through_socket

from ros2_cuda_ipc_core import BlockManager, PoolUnavailableError, Reader, StaleDescriptorError
from ros2_cuda_ipc_core.memory.host_memory import ImportedHostMemory

PEER = str(Path(__file__).with_name("core_peer.py"))


spawn = partial(spawn_peer, PEER)


def publish(pool: BlockManager, value: int):
    block = pool.acquire_for_publish()
    block.view((pool.block_size,), np.uint8)[:] = value
    return block.prepare_publish()


def test_50_closed_pools_leave_no_fds_or_mappings_here_or_in_a_reading_process():
    reader = Reader()
    peer = spawn("read-each", stdin=True)
    try:
        ours, theirs = [], []
        for i in range(50):
            pool = BlockManager(1 << 16, block_count=2, memory="host", reuse_delay=0)
            core = publish(pool, i)
            with reader.read(core) as handle:  # the same-process path
                kept = handle.view((16,), np.uint8)
            seen = ask(peer, core_to_json(core))  # the cross-process path, over the pool's socket
            assert seen["first"] == i
            if i % 2:
                pool.close()  # a view still alive: it keeps the mapping until it goes
                assert reader.stats()["pools_open"] == 1
                del kept
            else:
                del kept
                pool.close()
            assert reader.stats()["pools_open"] == 0 and reader.stats()["pools_cached"] == 0
            ours.append(resource_counts())
            theirs.append(ask(peer, ""))  # the peer checks liveness: the closed pool is dropped
            assert (theirs[-1]["pools_cached"], theirs[-1]["pools_open"], theirs[-1]["leases_held"]) == (0, 0, 0)
        # Flat means no growth: 45 leaked pools would add 45+ of each, while an unrelated fd or mapping
        # that another test left behind may go away meanwhile (seen on the H200).
        assert all(ours[-1][k] <= ours[4][k] for k in ("fds", "pool_maps")), f"here: {ours[4]} after 5 pools, {ours[-1]} after 50"
        assert all(theirs[-1][k] <= theirs[4][k] for k in ("fds", "pool_maps")), \
            f"reading process: {theirs[4]} after 5 pools, {theirs[-1]} after 50"
        assert reader.stats()["reads"] == 50 and theirs[-1]["reads"] == 50
    finally:
        peer.kill()
        peer.wait()


def test_close_gives_everything_back_at_once_without_views():
    gc.collect()
    before = resource_counts()
    pool = BlockManager(1 << 16, block_count=2, memory="host")
    with Reader().read(publish(pool, 1)) as handle:
        assert handle.view((4,), np.uint8)[0] == 1
    assert resource_counts() != before
    pool.close()
    assert resource_counts() == before


def test_a_view_keeps_its_mapping_past_close_and_no_longer():
    pool = BlockManager(1 << 16, block_count=2, memory="host")
    core = publish(pool, 3)
    reader = Reader()
    handle = reader.read(core)
    view = handle.view((1 << 16,), np.uint8)
    written = pool.acquire_for_publish()
    writable = written.view((1 << 16,), np.uint8)
    handle.close()
    gc.collect()
    before_close = resource_counts()
    pool.close()
    assert int(view.sum()) == 3 << 16  # still mapped, still the published bytes
    assert reader.stats()["pools_open"] == 1 and reader.stats()["leases_held"] == 1
    del view
    assert reader.stats()["pools_open"] == 0 and reader.stats()["leases_held"] == 0
    del writable
    after = resource_counts()
    assert after["pool_maps"] < before_close["pool_maps"] and after["fds"] < before_close["fds"]


def test_a_fork_after_close_leaves_the_fds_that_reused_the_pools_numbers_alone():
    """A closed pool still alive as an object, its metadata fd's number taken by another file since: a forked child
    (``subprocess`` with a ``preexec_fn`` runs the fork hooks, so does ``multiprocessing``) keeps that file.  Before,
    the child closed it: in a loaded CI run, a subprocess's own pipe, and the spawn failed with EBADF."""
    pool = BlockManager(4096, block_count=1, memory="host")
    number = pool._metadata_fd
    pool.close()
    read_end, write_end = os.pipe()
    try:
        os.dup2(read_end, number)  # the number now names this process's pipe, as a later open() could
        child = os.fork()
        if child == 0:  # the fork hooks have run: is the pipe still there?
            try:
                os.fstat(number)
                os._exit(0)
            except OSError:
                os._exit(3)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        spawned = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=lambda: None, timeout=60)
        assert spawned.returncode == 0
    finally:
        for fd in {read_end, write_end, number}:
            os.close(fd)
    del pool


def test_reader_drops_a_dead_publishers_pool_once_no_view_is_held():
    publisher = spawn("publish-and-wait")
    cores = [core_from_json(publisher.stdout.readline()) for _ in range(2)]
    reader = Reader(liveness_interval=0)
    reader.read(cores[0]).close()
    held = reader.read(cores[1]).view((1 << 20,), np.uint8)
    publisher.send_signal(signal.SIGKILL)
    publisher.wait()
    stats = reader.stats()
    assert (stats["pools_cached"], stats["pools_open"], stats["leases_held"]) == (0, 1, 1)
    assert held[0] == 22  # the data outlives its publisher while a view holds it
    del held
    stats = reader.stats()
    assert (stats["pools_cached"], stats["pools_open"], stats["leases_held"]) == (0, 0, 0)
    with pytest.raises(PoolUnavailableError):
        reader.read(cores[0])


def test_no_error_inside_read_leaves_a_lease(monkeypatch):
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        reader = Reader()
        core = publish(pool, 1)

        def no_lease_anywhere():
            return reader.stats()["leases_held"] == 0 and pool.stats()["blocks_held_by_readers"] == 0

        with pytest.raises(TypeError, match="stream"):
            reader.read(core, stream="not a stream")
        assert no_lease_anywhere()

        def refuse(*args):
            raise RuntimeError("ordering the consumer's stream failed")

        monkeypatch.setattr(ImportedHostMemory, "wait_ready", refuse)  # the step after the lease is taken
        with pytest.raises(RuntimeError, match="ordering"):
            reader.read(core)
        assert no_lease_anywhere()
        monkeypatch.undo()

        publish(pool, 2)
        publish(pool, 3)
        with pytest.raises(StaleDescriptorError):
            reader.read(core)
        assert no_lease_anywhere()

        remote = through_socket(publish(pool, 4))  # through the socket, as another process would
        reader.read(remote).close()
        pool.close()  # the publisher is gone by the time the lease is taken
        with pytest.raises(PoolUnavailableError, match="gone"):
            reader.read(remote)
        assert reader.stats()["leases_held"] == 0 and reader.stats()["pools_open"] == 0
