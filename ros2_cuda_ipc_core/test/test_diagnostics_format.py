"""/diagnostics statuses: what a pool and a reader write has exactly the keys the format names, and reads back as
written; what anyone else may write reads back as what it is (None, a float that is not finite), never an error."""

import math

import pytest

from ros2_cuda_ipc_core import BlockManager, DiagnosticsReporter, PoolDiagnostics, Reader, ReaderDiagnostics, read_status
from ros2_cuda_ipc_core.node.diagnostics_format import (
    POOL_KEYS,
    READER_KEYS,
    format_leases,
    parse_leases,
    reported_count,
    reported_number,
)


def test_a_pool_and_a_reader_write_the_keys_the_format_names_and_read_back_as_written(node):
    with BlockManager(4096, block_count=3, memory="host", reuse_delay=0) as pool:
        reader = Reader()
        sources = [PoolDiagnostics(node, "/fmt/image", pool), ReaderDiagnostics(node, "/fmt/image", reader)]
        try:
            statuses = DiagnosticsReporter.for_node(node).statuses()
        finally:
            for source in sources:
                source.close()
            reader.close()
    pool_status, reader_status = (read_status(status) for status in statuses)
    assert tuple(pool_status.values) == POOL_KEYS and tuple(reader_status.values) == READER_KEYS
    assert (pool_status.kind, pool_status.text("topic"), pool_status.text("pool_id")) == \
        ("pool", "/fmt/image", pool.pool_id.hex())
    assert (pool_status.count("block_count"), pool_status.count("blocks_free"), pool_status.number("rate_hz")) == (3, 3, 0.0)
    assert reader_status.leases() == {} and reader_status.number("latency_p50_ms") is None  # no frame read yet


@pytest.mark.parametrize("text,number,count", [
    ("12", 12.0, 12), ("-3", -3.0, -3), ("1e3", 1000.0, 1000), ("2.5", 2.5, 2.5), (" 7 ", 7.0, 7),
    ("inf", math.inf, math.inf), ("-Infinity", -math.inf, -math.inf), ("1e400", math.inf, math.inf),
    ("9" * 25, 1e25, 1e25), (str(2**63), 2.0**63, 2.0**63), ("9" * 5000, math.inf, math.inf),
    ("-", None, None), ("", None, None), ("abc", None, None), ("0x1f", None, None), (None, None, None),
    ("1_000", None, None), ("\u0661\u0662\u0663", None, None), ("\uff17", None, None), ("1e", None, None),
    ("+.5", 0.5, 0.5), ("\u00a07", None, None), ("9" * 5000 + "x", None, None),  # ASCII decimal only (issue 35)
])
def test_a_reported_number_is_what_it_says_or_none(text, number, count):
    assert reported_number(text) == number and reported_count(text) == count
    assert type(reported_count(text)) is type(count)  # an int only when it is one within int64


def test_nan_stays_nan():
    assert math.isnan(reported_number("nan")) and math.isnan(reported_count("-NaN"))


def test_leases_round_trip_and_anything_else_parses():
    leases = {"aa" * 16: 2, "bb" * 16: 0}
    assert parse_leases(format_leases(leases)) == leases
    assert parse_leases("aa:inf,bb,:3,,cc:x") == {"aa": math.inf, "bb": None, "": 3, "cc": None}
