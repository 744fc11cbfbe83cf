"""Test 1: 200 Ouster clouds (128 x 1024 points of 48 bytes) from one process; another checks every field of every
point through .field() and .structured, in the publisher's host memory."""

import json
import subprocess
import sys
from pathlib import Path

PEER = str(Path(__file__).with_name("cloud_peer.py"))


def test_every_field_of_every_point_of_200_ouster_clouds():
    sub = subprocess.Popen([sys.executable, PEER, "subscriber", "200"], stdout=subprocess.PIPE, text=True)
    pub = subprocess.Popen([sys.executable, PEER, "publisher", "200"], stdout=subprocess.PIPE, text=True)
    try:
        pub_out, _ = pub.communicate(timeout=240)
        sub_out, _ = sub.communicate(timeout=60)
    finally:
        pub.kill()
        sub.kill()
    published, seen = json.loads(pub_out.splitlines()[-1]), json.loads(sub_out.splitlines()[-1])
    assert published["stats"]["published"] == 200
    assert seen["errors"] == [] and seen["verified"] == 200
    assert seen["stats"]["imports"] == 1 and seen["stats"]["stale_drops"] == 0
