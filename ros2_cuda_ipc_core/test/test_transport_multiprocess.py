"""The lease protocol across real processes: DDS delivery, SIGKILLed readers and publishers."""

import os
import signal
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from core_peer import core_from_json, core_to_json
from peers import ask, run_peers, spawn_peer

from ros2_cuda_ipc_core import BlockManager, PoolUnavailableError, Reader, StaleDescriptorError

PEER = str(Path(__file__).with_name("core_peer.py"))


spawn = partial(spawn_peer, PEER)


def test_two_subscribers_verify_1000_messages_over_dds():
    count = 1000
    published, sub_outs = run_peers(PEER, ["dds-publisher", str(count), "2"],
                                    [["dds-subscriber", name, str(count)] for name in ("sub_a", "sub_b")],
                                    publisher_timeout=280)
    assert published["stats"]["published"] == count
    assert max(published["message_bytes"]) < 300  # the descriptor crosses DDS, never the 8 MiB payload
    for out in sub_outs:
        assert out["errors"] == []
        assert out["verified"] == count
        assert out["readonly"] and out["memfd_mapping"]
        assert out["stats"]["stale_drops"] == 0 and out["stats"]["imports"] == 1


def test_killed_reader_frees_its_block_at_once():
    # A lease is the reader's file lock, which the kernel drops as it closes the dead process's files, before
    # the process can be reaped: so the block is free the moment wait() returns, with no wait of ours at all.
    # (How long the kernel takes to tear a SIGKILLed process down on a loaded machine is not ours to bound.)
    with BlockManager(4096, block_count=1, memory="host", reuse_delay=0) as pool:
        block = pool.acquire_for_publish()
        core = block.prepare_publish()
        holder = spawn("hold", stdin=True)
        assert ask(holder, core_to_json(core)) == {"held": 0}
        assert pool.acquire_for_publish() is None
        assert pool.stats()["blocks_held_by_readers"] == 1
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        block = pool.acquire_for_publish()  # no timeout: a lease that outlived its reader (a TTL, a poll) fails here
        assert block is not None and block.block_id == 0
        assert pool.stats()["blocks_held_by_readers"] == 0
        block.cancel()


def shm_and_tmp() -> set[str]:
    """Our files in /dev/shm and /tmp; other processes' (Fast DDS segments of tests that 'colcon test' runs
    in parallel, say) come and go meanwhile."""
    return {str(p) for d in ("/dev/shm", "/tmp") for p in Path(d).iterdir() if "ros2_cuda_ipc" in p.name}


def test_killed_publisher_keeps_held_data_and_refuses_new_reads():
    before = shm_and_tmp()
    publisher = spawn("publish-and-wait")
    cores = [core_from_json(publisher.stdout.readline()) for _ in range(2)]
    reader = Reader()
    handle = reader.read(cores[0])
    view = handle.view((1 << 20,), np.uint8)
    assert view[0] == 11 and view[-1] == 11
    publisher.send_signal(signal.SIGKILL)
    publisher.wait()
    assert int(view.sum()) == 11 * (1 << 20)  # the mapping outlives its publisher
    with pytest.raises((PoolUnavailableError, StaleDescriptorError)):
        reader.read(cores[1])
    with pytest.raises((PoolUnavailableError, StaleDescriptorError)):
        Reader().read(cores[1])  # a reader that never imported the pool
    assert int(view[-1]) == 11
    handle.close()
    del view
    assert shm_and_tmp() - before == set()


def test_reader_as_another_user_gets_no_fds():
    if os.getuid() != 0:
        pytest.skip("needs root to drop a child to another uid")
    nobody = 65534
    for allowed, expect_ok in (((), False), ((nobody,), True)):
        with BlockManager(4096, block_count=1, memory="host", allowed_uids=allowed) as pool:
            core = pool.acquire_for_publish().prepare_publish()
            pid = os.fork()
            if pid == 0:  # child: become 'nobody' and try to read
                code = 3
                try:
                    os.setgid(nobody)
                    os.setuid(nobody)
                    with Reader(allowed_uids=[0]).read(core) as handle:
                        code = 0 if handle.view((16,), np.uint8) is not None else 4
                except PoolUnavailableError:
                    code = 1
                except BaseException:
                    code = 2
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == (0 if expect_ok else 1)
            stats = pool.stats()
            assert stats["refused_peers"] == (0 if expect_ok else 1)
            assert stats["fd_handouts"] == (1 if expect_ok else 0)
