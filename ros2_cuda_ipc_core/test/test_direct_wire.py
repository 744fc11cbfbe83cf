"""The direct path's bytes are input from a peer: any bytes, in any chunks, give records or an
InvalidDescriptorError, never another exception or an unbounded buffer; a subscribe request is a topic or
nothing; and a pool's server survives hostile requests and still serves a real subscriber."""

import socket
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros2_cuda_ipc_core import BlockManager, InvalidDescriptorError
from ros2_cuda_ipc_core.direct.wire import (
    INCOMPLETE,
    MAX_RECORD_BYTES,
    Frame,
    RecordReader,
    Template,
    frame_record,
    parse_request,
    parse_subscribe,
    subscribe_request,
    template_record,
)
from ros2_cuda_ipc_core.memory.layout import HEADER_SIZE
from ros2_cuda_ipc_core.pool.descriptor import socket_address

RECORDS = st.one_of(
    st.builds(lambda *f: frame_record(*f), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
              st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(-2**31, 2**31 - 1),
              st.integers(0, 2**32 - 1), st.binary(min_size=64, max_size=64), st.text(max_size=40).map(str.encode)),
    st.builds(template_record, st.integers(0, 2**32 - 1), st.binary(max_size=300)),
    st.binary(max_size=200),  # garbage between records
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(RECORDS, max_size=12), cuts=st.lists(st.integers(1, 400), max_size=20))
def test_any_bytes_in_any_chunks_give_records_or_a_typed_refusal(parts, cuts):
    data = b"".join(parts)
    reader = RecordReader()
    start = 0
    try:
        for cut in [*cuts, len(data)]:
            for record in reader.feed(data[start:start + cut]):
                assert isinstance(record, (Frame, Template))
            start += cut
            assert len(reader._buffer) <= MAX_RECORD_BYTES + 400  # never more than one record's worth held
    except InvalidDescriptorError:
        pass


@given(data=st.binary(max_size=2100))
def test_a_subscribe_request_is_a_topic_or_nothing(data):
    topic = parse_subscribe(data)
    assert topic is None or (isinstance(topic, str) and 0 < len(topic.encode()) <= 1024)


def test_a_request_round_trips_and_refuses_what_it_cannot_carry():
    assert parse_subscribe(subscribe_request("/camera/gpu")) == "/camera/gpu"
    with pytest.raises(ValueError):
        subscribe_request("x" * 1025)
    with pytest.raises(ValueError):
        frame_record(1, 0, 1, 1, 0, 0, bytes(64), b"f" * 5000)


def _handout(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(socket_address(path))
    _, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
    for fd in fds:
        socket.close(fd)
    return sock


def test_hostile_requests_leave_the_pool_serving_and_publishing():
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        hostile = []
        for junk in (b"R2CD\x01\x00\xff\xff" + b"x" * 100, b"R2CD\x09\x00\x01\x00x", b"\x00" * 3000,
                     subscribe_request("/t")[:-1] + b"\xff"):
            sock = _handout(pool.socket_path)
            sock.sendall(junk)
            hostile.append(sock)
        good = _handout(pool.socket_path)
        good.sendall(subscribe_request("/t"))
        deadline = time.monotonic() + 5
        while pool.direct.count() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool.direct.count() == 1  # the good one only: the rest were not requests
        block = pool.acquire_for_publish()
        block.view((4096,), np.uint8)[:] = 1
        block.prepare_publish()
        for sock in (*hostile, good):
            sock.close()
        assert pool.stats()["fd_handouts"] == 5


@given(data=st.binary(max_size=2100), cut=st.integers(0, 2100))
def test_a_request_in_two_parts_is_the_request_once_whole(data, cut):
    request = subscribe_request("/t" + data.hex()[:1000])
    first = parse_request(request[:cut])
    assert first == (parse_subscribe(request) if cut >= len(request) else INCOMPLETE)
    garbage = parse_request(data)
    assert garbage in (None, INCOMPLETE) or data.startswith(b"R2CD")


def _connected(pool) -> socket.socket:
    sock = _handout(pool.socket_path)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """The server closed ``sock``: an end of file, or a reset when it closed with our bytes unread."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_valid_request_split_over_two_writes_is_accepted_and_malformed_ones_are_closed_at_once():
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        request = subscribe_request("/split")
        split = _connected(pool)
        split.sendall(request[:5])
        time.sleep(0.05)  # two writes the server reads apart (not a timing assertion: either way it must accept)
        split.sendall(request[5:])
        malformed = [_connected(pool) for _ in range(3)]
        for sock, junk in zip(malformed, (b"GET / HTTP/1.0\r\n", request + b"x", b"R2CD\x01\x00\x00\x00"), strict=True):
            sock.sendall(junk)
        for sock in malformed:  # closed by the server now, not at the idle close
            sock.settimeout(pool._server.idle_timeout / 2)
            assert _closed_by_server(sock)
        deadline = time.monotonic() + 10
        while pool.direct.count() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool.direct.count() == 1
        assert pool.stats()["malformed_requests"] == 3
        split.close()
        for sock in malformed:
            sock.close()


def test_a_channel_that_sends_anything_after_its_request_is_closed():
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        sock = _connected(pool)
        sock.sendall(subscribe_request("/t"))
        deadline = time.monotonic() + 10
        while pool.direct.count() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        sock.sendall(frame_record(1, 0, 1, 1, 0, 0, bytes(64), b"forged") * 100)
        sock.settimeout(10)
        assert _closed_by_server(sock)
        assert pool.stats()["direct_garbage"] == 1 and pool.direct.count() == 0
        sock.close()


def test_a_stalled_channel_costs_no_write_until_its_peer_reads_then_takes_writes_again():
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        sock = _connected(pool)
        sock.sendall(subscribe_request("/t"))
        deadline = time.monotonic() + 10
        while not pool.direct.has("/t") and time.monotonic() < deadline:
            time.sleep(0.01)
        template = template_record(1, b"\0" * 100)
        frame = frame_record(1, 0, 1, 4096, 0, 0, bytes(64), b"f")
        while pool.stats()["direct_stalls"] == 0:  # nobody reads: its buffer fills, and it stalls
            pool.direct.send("/t", 1, template, frame)
        sent = pool.stats()["direct_sent"]
        for _ in range(1000):  # a thousand publications while stalled: no write, one drop each
            pool.direct.send("/t", 1, template, frame)
        stats = pool.stats()
        assert stats["direct_sent"] == sent and stats["direct_drops"] >= 1000 and not pool.direct.has("/t")
        sock.setblocking(False)
        reader = RecordReader()
        while pool.stats()["direct_sent"] == sent and time.monotonic() < deadline + 20:  # the peer reads ...
            try:
                reader.feed(sock.recv(1 << 16))
            except BlockingIOError:
                time.sleep(0.01)
            pool.direct.send("/t", 1, template, frame)
        assert pool.stats()["direct_sent"] > sent and pool.stats()["direct_channels"] == 1  # ... and is written again
        sock.close()


def test_the_publisher_yields_its_cpu_once_per_publication_a_channel_took_and_never_otherwise(monkeypatch):
    """The yield that lets a woken reader run before the publish's DDS write (channels.py): one per frame sent,
    however many channels took it; none with no channel, none while the only channel is stalled."""
    from ros2_cuda_ipc_core.direct import channels

    yields = []
    monkeypatch.setattr(channels.os, "sched_yield", lambda: yields.append(1))
    with BlockManager(4096, block_count=2, memory="host", reuse_delay=0) as pool:
        template = template_record(1, b"\0" * 100)
        frame = frame_record(1, 0, 1, 4096, 0, 0, bytes(64), b"f")
        pool.direct.send("/t", 1, template, frame)  # no channel yet
        assert yields == []
        socks = [_connected(pool) for _ in range(2)]
        for sock in socks:
            sock.sendall(subscribe_request("/t"))
        deadline = time.monotonic() + 10
        while pool.direct.count() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(5):
            pool.direct.send("/t", 1, template, frame)
        assert len(yields) == 5 and pool.stats()["direct_sent"] == 10
        while pool.direct.has("/t"):  # neither reads: both stall
            pool.direct.send("/t", 1, template, frame)
        before = len(yields)
        for _ in range(100):
            pool.direct.send("/t", 1, template, frame)
        assert len(yields) == before
        for sock in socks:
            sock.close()
