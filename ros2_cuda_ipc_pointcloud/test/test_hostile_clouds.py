"""Issue 35: a 1.5 KiB GpuPointCloud2 of 60 overlapping fields, each of count 65,536, from any DDS participant.

Its field names were expanded (3.9 million of them) before the overlap check: each message cost the reader
15 s of CPU and 345 MiB, so a subscription stalled and its RSS grew by 400 MiB.  Here, real processes: a
genuine publisher and a hostile one on one topic, and a PointCloudSubscription that must refuse every hostile
cloud as invalid while it keeps delivering the genuine ones, its RSS flat.  Asserted by counting, never by
a clock: the subscriber ends once it refused N and delivered N since the first refusal (it gives up at 120 s).
"""

import signal
import subprocess
from pathlib import Path

import pytest
from peers import last_json, line_with, spawn_peer

PEER = str(Path(__file__).with_name("hostile_cloud_peer.py"))
TOPIC = "hostile_clouds"
WANTED = 60


@pytest.mark.timeout(240)
def test_a_subscription_refuses_overlapping_fields_at_once_and_keeps_delivering_genuine_clouds():
    subscriber = spawn_peer(PEER, "subscriber", TOPIC, str(WANTED))
    genuine = spawn_peer(PEER, "genuine", TOPIC)
    hostile = None
    try:
        line_with(genuine.stdout, "ready")
        line_with(subscriber.stdout, "steady")
        hostile = spawn_peer(PEER, "hostile", TOPIC)
        size = int(line_with(hostile.stdout, "ready").split()[1])
        out, _ = subscriber.communicate(timeout=180)
        assert subscriber.returncode == 0
    finally:
        publishers = {name: proc for name, proc in (("hostile", hostile), ("genuine", genuine)) if proc is not None}
        for proc in publishers.values():
            proc.send_signal(signal.SIGTERM)
        for proc in publishers.values():
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        subscriber.kill()
    seen = last_json(out)
    print(f"\nhostile message {size} bytes; subscriber: {seen}")
    assert size < 2048  # the 1.5 KiB
    assert seen["refused"] >= WANTED and seen["delivered_since_first_refusal"] >= WANTED, seen
    assert seen["stats"]["dropped"].get("invalid", 0) == seen["refused"]  # each one dropped as invalid, nothing else
    rss_before, rss_peak, _ = seen["rss_mib"]
    assert rss_peak - rss_before < 32, seen["rss_mib"]  # was 73 -> 474 MiB
