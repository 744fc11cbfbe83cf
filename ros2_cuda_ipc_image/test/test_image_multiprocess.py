"""300 padded 1280x720 bgr8 frames from one process; another checks every pixel of every frame."""

import json
import subprocess
import sys
from pathlib import Path

PEER = str(Path(__file__).with_name("image_peer.py"))


def test_every_pixel_of_300_frames():
    sub = subprocess.Popen([sys.executable, PEER, "subscriber", "300"], stdout=subprocess.PIPE, text=True)
    pub = subprocess.Popen([sys.executable, PEER, "publisher", "300"], stdout=subprocess.PIPE, text=True)
    try:
        pub_out, _ = pub.communicate(timeout=240)
        sub_out, _ = sub.communicate(timeout=60)
    finally:
        pub.kill()
        sub.kill()
    published, seen = json.loads(pub_out.splitlines()[-1]), json.loads(sub_out.splitlines()[-1])
    assert published["stats"]["published"] == 300
    assert seen["errors"] == [] and seen["verified"] == 300
    assert seen["strides"] == published["strides"] == [4096, 3, 1]  # the padded row crossed as a stride
