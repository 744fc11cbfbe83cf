"""Forged messages sent over DDS to the real bridge processes: each is refused, counted and logged, no pool is
sized by one, and the bridge is still alive and converting good messages afterwards."""

import copy

import numpy as np
import pytest
from bridge_process import last_count, node_process, publish_filled, spin_for, spin_until
from gpu_marks import MEMORIES
from sensor_msgs.msg import Image
from setters import unchecked
from spinning import publishing, received

from ros2_cuda_ipc_image import ImagePublisher
from ros2_cuda_ipc_msgs.msg import GpuImage

PACKAGE = "ros2_cuda_ipc_image"


def image(height: int, width: int, encoding: str, step: int, data: bytes) -> Image:
    msg = Image(height=height, width=width, encoding=encoding, step=step)
    msg.data = data
    return msg


FORGED_IMAGES = [
    image(4294967295, 536870911, "rgba16", 4294967288, b""),  # was OverflowError in ftruncate: the node died
    image(65536, 65536, "rgba16", 65536 * 8, b""),  # was a 4 x 32 GiB pool replacing the working one
    image(2, 2, "rgb8", 6, b"\0" * 3),  # fewer bytes than its rows
    image(2, 4, "rgb8", 2, b"\0" * 8),  # a step shorter than a row
    image(2, 2, "not_an_encoding", 6, b"\0" * 12),
    image(0, 4, "rgb8", 12, b""),
    image(1, 1, "rgb8", 2_000_000, b"\0" * 2_000_000),  # carries all it claims, but beyond max_frame_bytes (1 MB here)
]


@pytest.mark.parametrize("memory", MEMORIES)
def test_image_to_gpu_survives_forged_images_and_still_converts(node, memory):
    good = image(4, 4, "rgb8", 12, bytes(range(48)))
    with node_process(PACKAGE, "image_to_gpu", node, "image",
                      [f"memory:={memory}", "max_frame_bytes:=1000000", "stats_period:=0.5"]) as bridge, \
            publishing(node, Image, "image") as cameras, received(node, GpuImage, "gpu_image") as got:
        # The bridge makes its publisher with the first good image: send until one reaches us.
        assert spin_until(node, lambda: got or (cameras.publish(good) and False) or not bridge.alive, 60)
        for forged in FORGED_IMAGES:  # in order, behind the good ones, and paced: none overwritten in the queue
            cameras.publish(forged)
            spin_for(node, 0.05)
        got.clear()
        assert spin_until(node, lambda: got or (cameras.publish(good) and False) or not bridge.alive, 60)
        assert bridge.alive and (list(got[0].shape), got[0].encoding) == ([4, 4, 3], "rgb8")
        spin_for(node, 1.0)  # a stats line after the last message
        assert bridge.stop() == 0
    assert last_count(bridge.log, "refused") == len(FORGED_IMAGES)
    assert bridge.log.count("publishing images from") == 1  # no forged image made a pool, the good one did
    assert f"from a {memory} pool of 4 blocks" in bridge.log
    assert "image dropped" in bridge.log and "Traceback" not in bridge.log


@pytest.mark.parametrize("memory", MEMORIES)
def test_gpu_to_image_survives_forged_gpu_images_and_still_converts(node, memory):
    with ImagePublisher(node, "gpu_image", width=4, height=4, encoding="rgb8", memory=memory) as cameras, \
            publishing(node, GpuImage, "gpu_image") as forger, received(node, Image, "image") as got, \
            node_process(PACKAGE, "gpu_to_image", node, "gpu_image",
                         ["max_frame_bytes:=1000000", "stats_period:=0.5"]) as bridge:


        assert spin_until(node, lambda: got or publish_filled(cameras, 9) or not bridge.alive, 60)
        assert spin_until(node, lambda: forger.get_subscription_count() > 0, 60)
        live = got and cameras.borrow(timeout=1.0).publish()  # a live core for the forged ones to borrow
        forged_messages = []
        for shape, strides in [([1, 1, 1], [2**63, 1, 1]),  # was ValueError in numpy: the node died
                               ([4294967295, 4294967295, 3], [12, 3, 1]),
                               ([4, 4, 3], [0, 0, 0]), ([40000, 40000, 3], [120000, 3, 1])]:
            forged = copy.copy(live)
            forged.shape, forged.strides = np.array(shape, np.uint32), np.array(strides, np.uint64)
            forged_messages.append(forged)
        huge = unchecked(GpuImage)
        huge.core = copy.copy(live.core)
        huge.core.byte_size = 2**64 - 1
        huge.shape, huge.strides, huge.encoding = live.shape, live.strides, "rgb8"
        forged_messages.append(huge)
        for forged in forged_messages:
            forger.publish(forged)
            spin_for(node, 0.05)
        got.clear()
        assert spin_until(node, lambda: got or publish_filled(cameras, 9) or not bridge.alive, 60)
        assert bridge.alive and all(bytes(image.data[:3]) == b"\t\t\t" for image in got)
        spin_for(node, 1.0)
        assert bridge.stop() == 0
    assert last_count(bridge.log, "refused") == len(forged_messages)
    assert "frame dropped" in bridge.log and "Traceback" not in bridge.log
