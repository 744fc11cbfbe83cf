"""Two processes over DDS, host memory: every dtype (bfloat16 and float8 too) round-trips bit for bit, in batches of
varying size, with dim_names, and with transposed strides kept as they are (the reader's view is the block)."""

from pathlib import Path

from peers import run_publisher_and_subscriber
from tensor_cases import DTYPES

PEER = str(Path(__file__).with_name("tensor_peer.py"))


def test_every_dtype_round_trips_bit_exactly_across_processes():
    count = 4 * len(DTYPES)  # every dtype with contiguous and with transposed strides, each twice
    published, seen = run_publisher_and_subscriber(PEER, str(count))
    assert published["published"] == count
    assert seen["errors"] == [] and seen["verified"] == count
    assert seen["leases_held"] == 0
    try:
        import torch
    except ImportError:
        return
    assert {"bfloat16", "float8_e4m3fn", "float8_e5m2"} <= set(seen["through_dlpack"])  # what torch names
    assert all(hasattr(torch, name) for name in seen["through_dlpack"])
