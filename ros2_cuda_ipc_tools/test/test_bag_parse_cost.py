"""Property tests: what a bag costs to read is bounded by a constant times its size (and the player's bound on one
chunk), whatever its bytes say.  Memory is measured with tracemalloc; work by what the readers count (records
walked, messages found), never by a wall clock.

- a chunk's records (``chunk_messages``, ``decompress_chunk``): any bytes, any stated size, any compression;
- whole MCAP files with their fields overwritten by hypothesis (lengths, offsets, sizes, times) read through
  ``BagSource`` to the last message;
- the Image and PointCloud2 parsers of bag_play (``parse_image``, ``parse_cloud``) on arbitrary bytes.
"""

from __future__ import annotations

import contextlib
import struct
import sys
import tracemalloc

import mcap_bombs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ros2_cuda_ipc_tools.bag.bag_errors import BagError
from ros2_cuda_ipc_tools.bag.bag_source import BagSource
from ros2_cuda_ipc_tools.bag.bounded_mcap import ChunkBounds, chunk_messages, decompress_chunk
from ros2_cuda_ipc_tools.bag.cdr_frames import parse_cloud, parse_image

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

BOUNDS = ChunkBounds(chunk_bytes=1 << 20, open_bytes=2 << 20)
SLACK = 256 * 1024  # what a call allocates whatever its input: frames, small objects, hypothesis' own


def peak_of(call) -> int:
    tracemalloc.start()
    try:
        call()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


records = st.lists(st.tuples(st.sampled_from([0x05, 0x05, 0x03, 0x80, 0x00]), st.binary(max_size=64)), max_size=200)


def _records_bytes(items: list[tuple[int, bytes]]) -> bytes:
    return b"".join(struct.pack("<BQ", opcode, len(body)) + body for opcode, body in items)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=records, compress=st.booleans(), stated_delta=st.integers(-64, 64), repeat=st.integers(1, 2000))
def test_a_chunk_costs_its_stated_size_and_records_within_a_budget_of_its_bytes(items, compress, stated_delta,
                                                                                 repeat) -> None:
    raw = _records_bytes(items) * repeat
    data = zstd.compress(raw) if compress else raw
    stated = max(len(raw) + stated_delta, 0)
    found: list = []

    def read() -> None:
        try:
            chunk = decompress_chunk(data, "zstd" if compress else "", stated, BOUNDS)
            found.extend(chunk_messages(chunk, {0, 1, 2}, len(data), BOUNDS))
        except BagError:
            pass
    peak = peak_of(read)
    assert peak <= 2 * min(stated, BOUNDS.chunk_bytes) + 64 * len(data) + SLACK, (peak, stated, len(data))
    assert len(found) <= BOUNDS.records(len(data))


@settings(max_examples=40, deadline=None)
@given(records_count=st.integers(1, 400_000))
def test_a_flood_of_empty_records_is_refused_exactly_past_its_budget(records_count) -> None:
    raw = struct.pack("<BQ", 0x80, 0) * records_count
    data = zstd.compress(raw)
    chunk = decompress_chunk(data, "zstd", len(raw), ChunkBounds(chunk_bytes=8 << 20, open_bytes=8 << 20))
    budget = BOUNDS.records(len(data))
    if records_count > budget:
        with pytest.raises(BagError, match="a flood of empty records"):
            chunk_messages(chunk, {1}, len(data), BOUNDS)
    else:
        assert chunk_messages(chunk, {1}, len(data), BOUNDS) == []


@pytest.fixture(scope="module")
def honest_mcap(tmp_path_factory) -> bytes:
    """A small indexed file of 6 images in 3 zstd chunks, each chunk a few KiB."""
    chunks = []
    for i in range(3):
        body = b""
        index = []
        for k in range(2):
            prefix, payload = mcap_bombs.image_message(2 * i + k, 16, 8)
            time = mcap_bombs.BASE + (2 * i + k) * 1000
            index.append((time, len(body)))
            body += mcap_bombs.message_head(time, len(prefix) + payload) + prefix + bytes([i]) * payload
        chunks.append(mcap_bombs.Chunk(zstd.compress(body), len(body), index[0][0], index[-1][0], index))
    path = mcap_bombs.write_mcap(tmp_path_factory.mktemp("honest") / "honest.mcap", chunks)
    return path.read_bytes()


def _fields(data: bytes) -> list[int]:
    """Where the top-level records' fields lie: every 8-byte boundary after each record's opcode, up to 64 bytes
    into it (lengths, times, sizes, offsets: the numbers a reader sizes things by)."""
    offsets, position = [], 8
    while position + 9 <= len(data) - 8:
        length = struct.unpack_from("<Q", data, position + 1)[0]
        offsets += [position + 1 + k for k in range(0, min(length + 8, 64), 4)]
        position += 9 + length
    return offsets


values = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**34, 2**63 - 1, 2**64 - 1]),
                   st.integers(0, 4096))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["<Q", "<I"]), values), min_size=1,
                      max_size=4))
def test_a_file_with_any_field_overwritten_costs_within_its_bound(honest_mcap, tmp_path, edits) -> None:
    data = bytearray(honest_mcap)
    fields = _fields(honest_mcap)
    for choice, fmt, value in edits:
        size = struct.calcsize(fmt)
        offset = min(fields[choice % len(fields)], len(data) - size)
        struct.pack_into(fmt, data, offset, value % (1 << (8 * size)))
    path = tmp_path / "edited.mcap"
    path.write_bytes(bytes(data))
    read: list[int] = []

    def play() -> None:
        try:
            source = BagSource(path, max_frame_bytes=1 << 20)
        except BagError:
            return
        try:
            for _, _, _, message in source.messages():
                read.append(len(message))
        except BagError:
            pass
        finally:
            source.close()
    peak = peak_of(play)
    bounds = ChunkBounds.for_frames(1 << 20)
    assert peak <= 2 * bounds.chunk_bytes + bounds.open_bytes + 64 * len(data) + 4 * SLACK, peak
    assert len(read) <= bounds.records(len(data)) * 4


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=4096), kind=st.sampled_from(["image", "cloud"]))
def test_the_image_and_cloud_parsers_allocate_no_more_than_their_input(data, kind) -> None:
    parse = parse_image if kind == "image" else parse_cloud
    holder: list = []

    def run() -> None:
        with contextlib.suppress(ValueError):
            holder.append(parse(data))
    assert peak_of(run) <= 4 * len(data) + 64 * 1024


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_chunk_is_inflated_to_its_stated_size_and_one_byte_more_never_further(compression) -> None:
    import lz4.frame

    raw = bytes(600_000)
    data = zstd.compress(raw) if compression == "zstd" else lz4.frame.compress(raw)
    assert bytes(decompress_chunk(data, compression, len(raw), BOUNDS)) == raw
    for stated in (len(raw) - 1, 4096):
        with pytest.raises(BagError, match=f"states {stated} uncompressed bytes and holds more"):
            decompress_chunk(data, compression, stated, BOUNDS)

    def lie() -> None:
        with pytest.raises(BagError):
            decompress_chunk(data, compression, 4096, BOUNDS)
    assert peak_of(lie) < 256 * 1024  # the stated 4 KiB and one byte inflated, not the 600 kB the data hold
    with pytest.raises(BagError, match="holds 600000"):
        decompress_chunk(data, compression, len(raw) + 10, BOUNDS)
    with pytest.raises(BagError, match="more than 1048576"):
        decompress_chunk(data, compression, 2 << 20, BOUNDS)
    with pytest.raises(BagError, match=r"does not decompress|holds"):
        decompress_chunk(data[: len(data) // 2] + b"\xff" * 8, compression, len(raw), BOUNDS)
