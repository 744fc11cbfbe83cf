"""300 padded 1280x720 bgr8 frames from one process; another checks every pixel of every frame."""

from pathlib import Path

from peers import run_publisher_and_subscriber

PEER = str(Path(__file__).with_name("image_peer.py"))


def test_every_pixel_of_300_frames():
    published, seen = run_publisher_and_subscriber(PEER, "300")
    assert published["stats"]["published"] == 300
    assert seen["errors"] == [] and seen["verified"] == 300
    assert seen["strides"] == published["strides"] == [4096, 3, 1]  # the padded row crossed as a stride
