"""The trust boundary on host memory, attacked from real processes: nothing handed out is writable, a peer's
locks are its own, the pool names who pins it, the FD server survives hostile peers, lifetimes hold at fork()
and exit, and the reader pays nothing for forged sockets.  The other-user tests make a user and remove it."""

import contextlib
import fcntl
import json
import logging
import mmap
import os
import pwd
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from core_peer import FIELDS, core_from_json, core_to_json
from gpu_marks import MEMORIES, needs_gpu
from isolation import system_user
from peers import ask, spawn_peer
from test_descriptors import copy_core
from through_socket import through_socket

from ros2_cuda_ipc_core import (
    BlockManager,
    InvalidDescriptorError,
    PoolIdentityError,
    PoolUnavailableError,
    Reader,
)
from ros2_cuda_ipc_core.memory.layout import HEADER_SIZE
from ros2_cuda_ipc_core.memory.memfd import future_write_seal_supported
from ros2_cuda_ipc_core.pool import block_manager as pool_module
from ros2_cuda_ipc_core.pool import fd_client, socket_names
from ros2_cuda_ipc_core.pool.descriptor import Descriptor, socket_address
from ros2_cuda_ipc_core.pool.fd_client import open_pool_connection
from ros2_cuda_ipc_core.pool.fd_server import OPEN_PER_IN_FLIGHT
from ros2_cuda_ipc_core.pool.imported_pool import close_fds
from ros2_cuda_ipc_core.pool.leases import FIRST_BLOCK_LEASE, lock_request
from ros2_cuda_ipc_core.pool.socket_names import pool_socket_path

HERE = Path(__file__).parent
HOSTILE = str(HERE / "hostile_peer.py")
CORE_PEER = str(HERE / "core_peer.py")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a user for the test needs root")
needs_future_write_seal = pytest.mark.skipif(not future_write_seal_supported(),
                                             reason="F_SEAL_FUTURE_WRITE needs Linux 5.1 or newer")


def hostile(*args: str, stdin: str | None = None, timeout: float = 60) -> dict:
    out = subprocess.run([sys.executable, HOSTILE, *args], input=stdin, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def publish(pool: BlockManager, value: int):
    block = pool.acquire_for_publish()
    block.view((pool.block_size,), np.uint8)[:] = value
    return block.prepare_publish()


def remote(core):
    """``core`` as another process sees it: read through the pool's socket, not the same-process path."""
    return through_socket(core)


@contextlib.contextmanager
def made_user(name: str):
    """A system user for the test, removed afterwards; its uid."""
    with system_user(name) as (uid, _gid):
        yield uid


@pytest.fixture(scope="module")
def other_uid():
    if os.geteuid() != 0:
        pytest.skip("making a user for the test needs root")
    with made_user(f"r2cipc{os.getpid() % 100000}") as uid:
        yield uid


def refused_everything(peer: dict) -> list[str]:
    """The write attempts that were allowed (none should be)."""
    return [f"{fd}.{attempt}" for fd in ("metadata", "memory") for attempt, result in peer[fd].items()
            if attempt != "read_only" and result == "ALLOWED"]


# --- 1: nothing handed out is writable ------------------------------------------------------------------


@needs_future_write_seal
def test_a_same_user_peer_cannot_write_through_the_handout_by_any_route():
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        core = publish(pool, 7)
        peer = hostile("attack", pool.socket_path)
        assert peer["fds"] == 2 and peer["metadata"]["read_only"] and peer["memory"]["read_only"]
        assert refused_everything(peer) == []  # mmap(PROT_WRITE), pwrite, mprotect, /proc reopen, chmod + reopen
        with Reader().read(remote(core)) as handle:  # the frame and its uid record are what the publisher wrote
            assert (handle.view((4096,), np.uint8) == 7).all()
        block = pool.acquire_for_publish()
        block.view((4096,), np.uint8)[:] = 9  # the publisher's own mapping still writes
        with Reader().read(remote(block.prepare_publish())) as handle:
            assert handle.view((1,), np.uint8)[0] == 9


@needs_gpu
@needs_future_write_seal
def test_a_cuda_pools_metadata_handout_is_read_only_too():
    # The block memory of a CUDA pool is the driver's export fd, handed as it is: what an importer may map is the
    # driver's to say (see the core README, allowed_uids); the metadata, whose records say which frame a block
    # holds, is a sealed memfd like a host pool's.
    with BlockManager(1 << 20, block_count=2, memory="cuda") as pool:
        peer = hostile("attack", pool.socket_path)
        assert peer["fds"] == 2 and peer["metadata"]["read_only"]
        assert [f"metadata.{a}" for a, r in peer["metadata"].items() if r == "ALLOWED" and a != "read_only"] == []


def test_an_allow_listed_other_user_cannot_write_either(other_uid):
    with BlockManager(4096, block_count=1, memory="host", allowed_uids=[other_uid]) as pool:
        publish(pool, 3)
        peer = hostile("attack", pool.socket_path, str(other_uid))
        assert peer["uid"] == other_uid and peer["fds"] == 2
        assert refused_everything(peer) == []
        assert peer["metadata"]["chmod_reopen_write"].startswith("refused")  # not the owner: no chmod


def test_a_reader_cannot_make_its_own_view_writable():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = publish(pool, 5)
        with Reader().read(remote(core)) as handle:
            view = handle.view((4096,), np.uint8)
            assert not view.flags.writeable
            with pytest.raises(ValueError):
                view.setflags(write=True)
            assert libc.mprotect(ctypes.c_void_p(view.ctypes.data), 4096, mmap.PROT_READ | mmap.PROT_WRITE) != 0


# --- 2: every peer gets its own open file description ---------------------------------------------------


def raw_handout(path: str) -> list[int]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(socket_address(path))
        _, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
    return fds


def test_two_handouts_are_two_descriptions_and_neither_is_the_publishers():
    with BlockManager(4096, block_count=1, memory="host") as pool:
        first, second = raw_handout(pool.socket_path), raw_handout(pool.socket_path)
        try:
            assert os.fstat(first[0]).st_ino == os.fstat(second[0]).st_ino  # the same file
            fcntl.fcntl(first[0], fcntl.F_OFD_SETLK, lock_request(fcntl.F_RDLCK, FIRST_BLOCK_LEASE, 1234))
            test = lock_request(fcntl.F_WRLCK, FIRST_BLOCK_LEASE)
            assert fcntl.fcntl(second[0], fcntl.F_OFD_GETLK, test)[:2] != b"\x02\x00"  # F_UNLCK: it sees a lock
            assert pool.holders() == {0: [1234]}  # ... and so does the publisher: not its own description
        finally:
            for fd in first + second:
                os.close(fd)
        assert pool.holders() == {}


def test_a_lock_taken_through_the_handed_out_fd_goes_with_the_peer():
    with BlockManager(4096, block_count=1, memory="host", reuse_delay=0) as pool:
        publish(pool, 1)
        peer = spawn_peer(HOSTILE, "lock-and-exit", pool.socket_path, "0", stdin=True)
        try:
            locked = json.loads(peer.stdout.readline())
            assert pool.acquire_for_publish() is None
            assert pool.stats()["holders"] == {0: [locked["pid"]]}
            peer.stdin.write("go\n")
            peer.stdin.flush()
            assert peer.wait(30) == 0
        finally:
            peer.kill()
        block = pool.acquire_for_publish()  # the peer's lock died with it, not with the pool
        assert block is not None
        block.cancel()


# --- 8: who pins the pool -------------------------------------------------------------------------------


def test_stats_name_the_reader_pids_holding_each_block(caplog, monkeypatch):
    monkeypatch.setattr(pool_module, "STARVED_AFTER", 0.0)
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        holders = []
        try:
            for value in (1, 2):
                holder = spawn_peer(CORE_PEER, "hold", stdin=True)
                holders.append(holder)
                ask(holder, core_to_json(publish(pool, value)))
            assert pool.stats()["holders"] == {0: [holders[0].pid], 1: [holders[1].pid]}
            with caplog.at_level(logging.WARNING, logger="ros2_cuda_ipc"):
                for _ in range(5):
                    assert pool.acquire_for_publish() is None
            starved = [r.getMessage() for r in caplog.records if "no free block" in r.getMessage()]
            assert len(starved) == 1  # said once, not once a miss
            assert f"block 0: pid {holders[0].pid}" in starved[0] and f"block 1: pid {holders[1].pid}" in starved[0]
        finally:
            for holder in holders:
                holder.kill()
                holder.wait()
        assert pool.stats()["holders"] == {}


def test_one_process_reading_a_block_twice_is_one_holder():
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = publish(pool, 1)
        reader = Reader()
        with reader.read(remote(core)), reader.read(remote(core)):
            assert pool.holders() == {0: [os.getpid()]}
        assert pool.holders() == {}


# --- 6: the FD server against hostile peers -------------------------------------------------------------


def test_a_peer_that_never_reads_its_handouts_is_bounded_and_timed_out():
    with BlockManager(4096, block_count=1, memory="host") as pool:
        pool._server.max_per_peer = 2
        pool._server.idle_timeout = 0.2
        held = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3)]
        try:
            for sock in held:  # connected, nothing read: their fds stay in flight
                sock.settimeout(30)
                sock.connect(socket_address(pool.socket_path))
            deadline = time.monotonic() + 30
            while pool.stats()["fd_handouts"] + pool.stats()["peer_limit_refusals"] < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert pool.stats()["peer_limit_refusals"] == 1  # the third: this pid has two in flight
            for handout in held[:2]:  # idle: the server closed its end of both, each handout unread ...
                # (each has its own deadline: read the second before its own close and it no longer counts; a loaded
                # run once did, when this waited for the first alone)
                hangup = select.poll()
                hangup.register(handout, select.POLLRDHUP)
                assert hangup.poll(30_000)
            answers = []
            for sock in held:
                _, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
                answers.append(len(fds))
                for fd in fds:
                    os.close(fd)
            assert answers == [2, 2, 0]
            with pytest.raises(PoolUnavailableError, match="without handing out fds"):
                Reader().read(remote(publish(pool, 1)))  # ... and still counts them against this live pid
        finally:
            for sock in held:
                sock.close()


def test_a_peer_that_reads_its_handouts_but_keeps_them_open_is_bounded_by_connections():
    with BlockManager(4096, block_count=1, memory="host") as pool:
        pool._server.max_per_peer = 2
        held = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(OPEN_PER_IN_FLIGHT * 2 + 1)]
        try:
            answers = []
            for sock in held:  # each read at once: none in flight, all kept open
                sock.settimeout(30)
                sock.connect(socket_address(pool.socket_path))
                _, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
                answers.append(len(fds))
                for fd in fds:
                    os.close(fd)
            assert answers == [2] * (OPEN_PER_IN_FLIGHT * 2) + [0]
            assert pool.stats()["peer_limit_refusals"] == 1
        finally:
            for sock in held:
                sock.close()


def test_a_peer_that_closes_its_handouts_is_never_limited():
    with BlockManager(4096, block_count=1, memory="host", reuse_delay=0) as pool:
        pool._server.max_per_peer = 1
        # Each Reader imports afresh; the peer's close and its next connection often reach the server in one
        # batch of events (100 imports found a server thread that died of that once).
        for value in range(100):
            with Reader().read(remote(publish(pool, value))) as handle:
                assert handle.view((1,), np.uint8)[0] == value
        assert pool.stats()["peer_limit_refusals"] == 0 and pool.stats()["fd_handouts"] == 100


def test_threads_of_one_process_ask_a_pool_for_one_handout_at_a_time():
    """Forty direct subscriptions of one process, each on its own thread, had seventeen handouts sent before their
    threads read them on a loaded CI machine: the pool refused one.  A process asks a pool one at a time: here a
    server that answers nothing for a while sees one connection, not eight."""
    name = f"ros2_cuda_ipc_test_slow_{os.getpid()}"
    with BlockManager(4096, block_count=1, memory="host") as pool, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.bind("\0" + name)
        slow.listen(16)
        desc = Descriptor.from_message(copy_core(publish(pool, 1), socket_path="@" + name))
        start = threading.Barrier(8)
        failed: list[BaseException] = []

        def connect() -> None:
            start.wait()
            try:
                open_pool_connection(desc, (), 30.0, None)
            except PoolUnavailableError as exc:
                failed.append(exc)

        threads = [threading.Thread(target=connect) for _ in range(8)]
        for thread in threads:
            thread.start()
        slow.setblocking(False)
        for _ in range(8):
            assert select.select([slow], [], [], 30)[0], "no thread connected"
            time.sleep(0.2)  # time for the others to connect too, were they not waiting their turn
            pending = []
            with contextlib.suppress(BlockingIOError):
                while True:
                    pending.append(slow.accept()[0])
            for conn in pending:
                conn.close()  # no handout: that thread gives up, the next one connects
            assert len(pending) == 1, f"{len(pending)} connections waited for a handout at once"
        for thread in threads:
            thread.join(30)
        assert len(failed) == 8 and all("without handing out fds" in str(exc) for exc in failed), failed
        assert fd_client._one_at_a_time._locks == {}  # nothing kept once no connection is under way


def test_a_pool_that_never_answers_holds_up_this_process_s_connections_to_it_alone():
    with BlockManager(4096, block_count=1, memory="host") as pool, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(f"\0ros2_cuda_ipc_test_silent_{os.getpid()}")
        silent.listen(8)  # connections queue; nothing is ever sent
        core = publish(pool, 1)
        genuine = Descriptor.from_message(core)
        mute = Descriptor.from_message(copy_core(core, socket_path=f"@ros2_cuda_ipc_test_silent_{os.getpid()}"))
        outcome: list[BaseException | None] = []

        def wait_for_the_silent_pool() -> None:
            try:
                open_pool_connection(mute, (), 3.0, None)
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        waiting = threading.Thread(target=wait_for_the_silent_pool)
        waiting.start()
        time.sleep(0.3)  # the thread waits for the silent pool's handout, holding its address
        began = time.monotonic()
        sock, _header, fds, _ = open_pool_connection(genuine, (), 3.0, None)
        assert time.monotonic() - began < 2.0  # not behind the silent pool's wait (3 s)
        sock.close()
        close_fds(fds)
        with pytest.raises(PoolUnavailableError, match="another thread of this process was still waiting"):
            open_pool_connection(mute, (), 0.5, None)
        child = os.fork()  # the waiting thread is not in the child: its lock must not be either
        if child == 0:
            status = 4  # connected: the silent socket cannot have answered
            try:
                open_pool_connection(mute, (), 0.5, None)
            except PoolUnavailableError as exc:
                status = 3 if "another thread" in str(exc) else 0
            os._exit(status)
        assert os.waitpid(child, 0)[1] == 0  # its own connection timed out: not refused for the parent's thread
        waiting.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], PoolUnavailableError), outcome
        assert "did not answer within 3 s" in str(outcome[0])
        assert fd_client._one_at_a_time._locks == {}


def test_out_of_fds_the_server_pauses_says_so_once_and_recovers():
    peer = subprocess.Popen([sys.executable, HOSTILE, "starved-publisher"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = json.loads(peer.stdout.readline())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(60)
            sock.connect(socket_address(started["socket"]))  # queued: the server cannot accept it yet
            peer.stdin.write("go\n")
            peer.stdin.flush()
            _, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
        for fd in fds:
            os.close(fd)
        out, err = peer.communicate(timeout=60)
    finally:
        peer.kill()
    stats = json.loads(out.strip().splitlines()[-1])
    assert len(fds) == 2 and stats["fd_handouts"] == 1
    # Backing off to 1 s, half a second out of fds is a handful of retries, not a selector spinning (~10^5).
    assert 1 <= stats["accept_pauses"] < 50
    assert err.count("cannot accept connections") == 1 and "accepts connections again" in err


def test_allowed_uids_with_a_socket_dir_admit_that_user_and_no_other(other_uid):
    socket_dir = tempfile.mkdtemp(prefix="r2cipc-", dir="/tmp")
    try:
        os.chmod(socket_dir, 0o711)
        with BlockManager(4096, block_count=1, memory="host", socket_dir=socket_dir,
                          allowed_uids=[other_uid]) as pool:
            assert hostile("connect", pool.socket_path, str(other_uid)) == {"fds": 2, "header": HEADER_SIZE}
            nobody = pwd.getpwnam("nobody").pw_uid
            assert hostile("connect", pool.socket_path, str(nobody)) == {"error": "Permission denied"}
            assert os.stat(pool.socket_path).st_mode & 0o007 == 0  # the ACL admits the one user, no others
    finally:
        os.rmdir(socket_dir)


def test_allowed_uids_on_a_filesystem_without_acls_is_refused_clearly(other_uid):
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    socket_dir = tempfile.mkdtemp(prefix="r2cipc-", dir="/dev/shm")
    try:
        try:
            with BlockManager(4096, block_count=1, memory="host", socket_dir=socket_dir, allowed_uids=[other_uid]):
                pytest.skip("this /dev/shm supports ACLs: nothing to refuse")
        except Exception as exc:
            assert "ACL" in str(exc) and "socket_dir unset" in str(exc)
    finally:
        for leftover in Path(socket_dir).iterdir():
            leftover.unlink()
        os.rmdir(socket_dir)


def test_another_user_not_allow_listed_is_refused_and_counted(other_uid):
    with BlockManager(4096, block_count=1, memory="host") as pool:
        assert hostile("connect", pool.socket_path, str(other_uid)) == {"fds": 0, "header": 0}
        assert pool.stats()["refused_peers"] == 1


# --- 7: lifetimes at the edges --------------------------------------------------------------------------


def lines_from_parent_and_child(peer, count: int) -> dict:
    """The peer's next ``count`` JSON lines, merged: a forked child says when it runs (its fork hooks have run),
    in any order with its parent's lines."""
    merged: dict = {}
    for _ in range(count):
        merged.update(json.loads(peer.stdout.readline()))
    return merged


def test_a_forked_child_does_not_keep_a_killed_readers_block():
    with BlockManager(4096, block_count=1, memory="host", reuse_delay=0) as pool:
        core = publish(pool, 1)
        peer = spawn_peer(HOSTILE, "fork-reader", stdin=True)
        try:
            peer.stdin.write(core_to_json(core) + "\n")
            peer.stdin.flush()
            pids = lines_from_parent_and_child(peer, 2)
            assert pool.holders() == {0: [pids["reader"]]}
            os.kill(pids["reader"], signal.SIGKILL)
            peer.wait()
            block = pool.acquire_for_publish()  # the child still runs, holding none of the reader's fds
            assert block is not None
            os.kill(pids["child"], 0)  # the child is still there
            block.cancel()
        finally:
            peer.kill()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pids["child"], signal.SIGKILL)


def test_a_forked_child_does_not_keep_a_killed_publisher_alive_or_listening():
    peer = spawn_peer(HOSTILE, "fork-publisher")
    try:
        pids = lines_from_parent_and_child(peer, 3)
        core = core_from_json(json.dumps({name: pids[name] for name in ("pool_id", "event_handle", *FIELDS)}))
        reader = Reader()
        reader.read(core).close()
        os.kill(pids["publisher"], signal.SIGKILL)
        peer.wait()
        with pytest.raises(PoolUnavailableError, match="gone"):  # the child holds no liveness lock
            reader.read(core)
        with pytest.raises(PoolUnavailableError, match="nothing listens"):  # nor the listening socket
            Reader(check_publisher_pid=False).read(core)
    finally:
        peer.kill()
        with contextlib.suppress(ProcessLookupError, NameError):
            os.kill(pids["child"], signal.SIGKILL)


def test_a_reader_exiting_with_a_handle_open_exits_quietly():
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = publish(pool, 1)
        out = subprocess.run([sys.executable, HOSTILE, "exit-holding"], input=core_to_json(core) + "\n",
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout) == {"held": 0}
    assert out.stderr == ""


def test_stale_socket_files_of_dead_publishers_are_removed_at_start(short_tmp_path):
    dead_pid = subprocess.Popen(["true"])  # its pid is free once it is reaped
    dead_pid.wait()
    stale = short_tmp_path / os.path.basename(pool_socket_path(b"\xab" * 16, dead_pid.pid, '/'))
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(stale))
    leftover.close()  # a SIGKILLed publisher leaves its file like this
    alive = short_tmp_path / os.path.basename(pool_socket_path(b"\xcd" * 16, os.getpid(), '/'))
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(alive))
    listening.listen(1)
    unrelated = short_tmp_path / "ros2_cuda_ipc-not-a-pool.sock"
    unrelated.write_text("")
    try:
        with BlockManager(4096, block_count=1, memory="host", socket_dir=short_tmp_path) as pool:
            assert not stale.exists() and alive.exists() and unrelated.exists()
            assert Path(pool.socket_path).exists() and f"-{os.getpid()}." in pool.socket_path
        assert not Path(pool.socket_path).exists()
    finally:
        listening.close()


def test_a_views_base_covers_its_own_block_only():
    with BlockManager(4096, block_count=3, memory="host", reuse_delay=0) as pool:
        cores = [publish(pool, value) for value in (1, 2, 3)]
        with Reader().read(remote(cores[1])) as handle:
            view = handle.view((16,), np.uint8)
            base = np.asarray(view).base
            everything = np.frombuffer(base, np.uint8)
            assert len(everything) == pool.block_size and (everything == 2).all()


# --- 5: forged sockets cost nothing, or one bounded wait ------------------------------------------------


class SilentPool:
    """A socket named as pool ``pool_id``'s that accepts and never answers; counts its connections."""

    def __init__(self, pool_id: bytes, pid: int | None = None) -> None:
        self.path = pool_socket_path(pool_id, os.getpid() if pid is None else pid, None)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(socket_address(self.path))
        self.sock.listen(64)
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.accepted.append(self.sock.accept()[0])

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def forged(core, path: str, pool_id: bytes):
    """``core`` naming the socket ``path`` and ``pool_id``, its publisher pid the one the socket's name states."""
    owner = socket_names.socket_owner(path)
    return copy_core(core, socket_path=path, pool_id=np.frombuffer(pool_id, np.uint8),
                     publisher_pid=owner[0] if owner else core.publisher_pid)


@pytest.mark.parametrize("memory", MEMORIES)
def test_a_silent_socket_costs_one_bounded_wait_not_one_per_message(memory):
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = publish(pool, 1)
        silent = SilentPool(b"\x11" * 16)
        kind = 1 if memory == "cuda" else 0  # a CUDA descriptor imports the same way, once CUDA is known to work
        try:
            reader = Reader(retry_after=600)  # the default, 1 s, could pass while a loaded machine runs the loop
            with pytest.raises(PoolUnavailableError, match=r"did not answer within 0\.5 s"):
                reader.read(copy_core(forged(core, silent.path, b"\x11" * 16), memory=kind))
            for _ in range(20):
                with pytest.raises(PoolUnavailableError, match="not tried again"):
                    reader.read(copy_core(forged(core, silent.path, b"\x11" * 16), memory=kind))
            assert len(silent.accepted) == 1
            with reader.read(remote(core)) as handle:  # the real pool is not held against anyone
                assert handle.view((1,), np.uint8)[0] == 1
        finally:
            silent.close()


def test_a_socket_not_named_as_its_pool_or_of_a_dead_publisher_is_never_connected():
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = publish(pool, 1)
        dead = subprocess.Popen(["true"])
        dead.wait()
        elsewhere = SilentPool(b"\x22" * 16, pid=dead.pid)
        try:
            reader = Reader()
            with pytest.raises(PoolUnavailableError, match="not running"):
                reader.read(forged(core, elsewhere.path, b"\x22" * 16))
            with pytest.raises(InvalidDescriptorError, match="socket name says pool"):
                reader.read(forged(core, elsewhere.path, b"\x33" * 16))
            for path in ("@/tmp/dbus-AbCdEf", "/run/user/0/bus", "@/tmp/.X11-unix/X0"):
                with pytest.raises(InvalidDescriptorError, match="not named as a ros2_cuda_ipc pool"):
                    reader.read(forged(core, path, b"\x22" * 16))
            assert elsewhere.accepted == []
            # A forged descriptor naming the live pool's id with another socket does not shut the pool out:
            with pytest.raises(InvalidDescriptorError):
                reader.read(forged(core, elsewhere.path, bytes(core.pool_id)))
            with reader.read(remote(core)) as handle:
                assert handle.view((1,), np.uint8)[0] == 1
        finally:
            elsewhere.close()


# --- 4: typed errors for odd inputs ---------------------------------------------------------------------


@pytest.mark.parametrize("free", ["0", "1", "2", "3", "4"])
def test_a_reader_out_of_fds_gets_a_typed_error_that_says_so(free):
    # An import needs the socket, the two fds it receives, its own lease description and one fd per mapping
    # (Python's mmap keeps a duplicate): 0-2 free fail while receiving, 3-4 while mapping.
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = publish(pool, 1)
        seen = hostile("read-with-free-fds", free, stdin=core_to_json(remote(core)) + "\n")
    assert seen["error"] == "PoolUnavailableError", seen
    assert ("file descriptors" if int(free) < 3 else "Too many open files") in seen["message"], seen


def test_a_reader_with_enough_fds_reads():
    with BlockManager(4096, block_count=1, memory="host") as pool:
        core = publish(pool, 1)
        assert hostile("read-with-free-fds", "5", stdin=core_to_json(remote(core)) + "\n") == {"error": None}


def test_a_duck_typed_core_with_a_huge_int_pool_id_is_refused_without_allocating_it():
    import tracemalloc

    from ros2_cuda_ipc_core.pool.descriptor import Descriptor

    core = type("Core", (), {"socket_path": pool_socket_path(bytes(16), 1, None), "pool_id": 800_000_000, "block_id": 0,
                             "uid": 1, "publisher_pid": 1, "memory": 0, "device_id": 0, "event_handle": bytes(64),
                             "byte_size": 1})()
    tracemalloc.start()
    try:
        with pytest.raises(InvalidDescriptorError, match="pool_id"):
            Descriptor.from_message(core)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


# --- 9: a pool is an instance, not an id -----------------------------------------------------------------


def test_a_process_serving_anothers_pool_id_never_has_its_bytes_read_for_that_pool(short_tmp_path):
    """The second pass's hole: a squatter serving the victim's public pool id from its own socket, read first,
    must never serve the victim's genuine descriptors; descriptors that claim the victim's pid for the squatter's
    socket, or a socket named with the victim's pid but served by the squatter, are refused and counted."""
    victim = spawn_peer(CORE_PEER, "publish-and-wait")
    squatter = None
    try:
        genuine = [core_from_json(victim.stdout.readline()) for _ in range(2)]
        squatter = spawn_peer(HOSTILE, "squat", bytes(genuine[0].pool_id).hex(), str(victim.pid), str(short_tmp_path))
        forged = {name: core_from_json(text) for name, text in json.loads(squatter.stdout.readline()).items()}
        reader = Reader()
        with reader.read(forged["own"]) as handle:  # its own pool, its own bytes: it may publish frames of its own
            assert bytes(handle.view((8,), np.uint8)) == b"HACKED!!"
        for _ in range(3):
            for core, value in zip(genuine, (11, 22), strict=True):
                with reader.read(core) as handle:
                    view = handle.view((1 << 20,), np.uint8)
                    assert (view == value).all(), f"a genuine frame read {bytes(view[:8])!r}"
            with pytest.raises(PoolIdentityError, match="socket's name pid"):
                reader.read(forged["claims_victim"])
            with pytest.raises(PoolIdentityError, match=f"served by pid {squatter.pid}, not by pid {victim.pid}"):
                Reader().read(forged["named_as_victim"])  # a fresh reader each time: nothing remembered helps it
        stats = reader.stats()
        assert stats["identity_mismatches"] == 3 and stats["pool_id_conflicts"] == 1, stats
        assert stats["imports"] == 2 and stats["reads"] == 7, stats  # two instances, each read as itself
    finally:
        for peer in (victim, squatter):
            if peer is not None:
                peer.kill()
                peer.wait()
