"""Test 1: 200 Ouster clouds (128 x 1024 points of 48 bytes) from one process; another checks every field of every
point through .field() and .structured, in the publisher's host memory."""

from pathlib import Path

from peers import run_publisher_and_subscriber

PEER = str(Path(__file__).with_name("cloud_peer.py"))


def test_every_field_of_every_point_of_200_ouster_clouds():
    published, seen = run_publisher_and_subscriber(PEER, "200")
    assert published["stats"]["published"] == 200
    assert seen["errors"] == [] and seen["verified"] == 200
    assert seen["stats"]["imports"] == 1 and seen["stats"]["stale_drops"] == 0
