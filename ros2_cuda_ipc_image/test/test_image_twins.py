"""The CPU twins of an ImagePublisher, in one process with real rclpy publishers and subscriptions.

Cross-process, cross-namespace and cross-user fallback is in test_fallback_netns.py / test_fallback_uid.py.
"""

import importlib.util
import io
import os

import numpy as np
import pytest
from gpu_marks import MEMORIES
from sensor_msgs.msg import CompressedImage, Image
from spinning import received, spin_until, spinning
from std_msgs.msg import Header

from ros2_cuda_ipc_core import jpeg_backend
from ros2_cuda_ipc_core.pool.socket_names import pool_socket_path
from ros2_cuda_ipc_image import ImagePublisher, ImageSubscription, compressed_format

HEIGHT, WIDTH = 48, 64


def smooth_pattern(seq: int) -> np.ndarray:
    """A gradient (JPEG keeps it within a few levels) whose colour channels differ, so a swapped order shows."""
    rows, cols = np.mgrid[:HEIGHT, :WIDTH]
    return np.stack([(rows * 4 + seq) % 256, cols * 3, 255 - cols * 2], axis=-1).astype(np.uint8)


def publish(pub, pattern, memory):
    with pub.borrow(timeout=5.0) as frame:
        if memory == "host":
            frame.array[...] = pattern
        else:
            import torch

            torch.from_dlpack(frame).copy_(torch.from_numpy(pattern).cuda())
            torch.cuda.synchronize()
        frame.publish()


@pytest.mark.parametrize("memory", MEMORIES)
def test_no_twin_subscriber_means_no_download_and_no_encode(node, memory):
    got = []
    with ImagePublisher(node, "twins_idle", width=WIDTH, height=HEIGHT, encoding="rgb8", memory=memory,
                        reuse_delay=0) as pub, \
            ImageSubscription(node, "twins_idle", lambda view: (got.append(np.array(view) if memory == "host"
                                                                           else view.shape), view.close())) as sub, \
            spinning(node) as executor:
        assert spin_until(executor, lambda: pub.subscription_count > 0)
        for seq in range(5):
            publish(pub, smooth_pattern(seq), memory)
            assert spin_until(executor, lambda n=seq: len(got) > n)
        stats = pub.fallback_stats()
        assert stats["offered"] == stats["idle"] == 5
        assert stats["leased"] == stats["downloads"] == stats["encodes"] == 0
        assert sub.stats()["frames"] == {"zero_copy": 5, "fallback": 0, "refused": 0}
        assert not sub.stats()["twin_subscribed"]


@pytest.mark.parametrize("memory", MEMORIES)
def test_raw_twin_is_the_frame_and_compressed_twin_decodes_with_pillow(node, memory):
    from PIL import Image as PillowImage

    with ImagePublisher(node, "twins_both", width=WIDTH, height=HEIGHT, encoding="rgb8", row_alignment=256,
                        memory=memory, jpeg_quality=95) as pub, \
            received(node, Image, "twins_both/cpu") as raw, \
            received(node, CompressedImage, "twins_both/cpu/compressed") as jpeg, spinning(node) as executor:
        assert pub.twins is not None and pub.twins.topics == ("/twins_both/cpu", "/twins_both/cpu/compressed")
        assert spin_until(executor, lambda: all(pub.twins.subscription_counts().values()))
        pattern = smooth_pattern(3)
        # Both twins of one frame, waited for up to 30 s: the first CUDA download and nvJPEG's start took over 10 s
        # under the GPU suite's load (session 20).  The frame is published again only while the twins' worker has
        # leased none (a frame offered before the twin publishers saw their subscribers is skipped), so exactly one
        # frame is converted, as the counts below require.
        for _ in range(30):
            if pub.fallback_stats()["leased"] == 0:
                publish(pub, pattern, memory)
            if spin_until(executor, lambda: raw and jpeg, timeout=1.0):
                break
        assert raw and jpeg, f"raw twins {len(raw)}, compressed twins {len(jpeg)} after 30 s; {pub.fallback_stats()}"
        image = raw[0]
        assert (image.height, image.width, image.encoding, image.step) == (HEIGHT, WIDTH, "rgb8", 256)
        rows = np.frombuffer(bytes(image.data), np.uint8).reshape(HEIGHT, 256)[:, :WIDTH * 3]
        assert np.array_equal(rows.reshape(HEIGHT, WIDTH, 3), pattern)
        assert jpeg[0].format == "rgb8; jpeg compressed bgr8"
        decoded = np.asarray(PillowImage.open(io.BytesIO(bytes(jpeg[0].data))).convert("RGB"))
        assert decoded.shape == pattern.shape
        assert np.abs(decoded.astype(int) - pattern).mean() < 2.0  # JPEG tolerance at quality 95
        stats = pub.fallback_stats()
        assert (stats["leased"], stats["downloads"], stats["encodes"]) == (1, 1, 1)
        assert stats["warm_ups"] == 1  # the JPEG encoder's, before the first frame's encode, on the worker
        publish(pub, smooth_pattern(4), memory)
        assert spin_until(executor, lambda: len(jpeg) > 1)
        assert pub.fallback_stats()["warm_ups"] == 1  # once: the second frame is encoded warm
        if memory == "cuda" and importlib.util.find_spec("torchvision") is not None:
            assert jpeg_backend("cuda") == "torchvision"  # nvJPEG: the raw frame is not downloaded for the JPEG
        assert stats["published /twins_both/cpu"] == stats["published /twins_both/cpu/compressed"] == 1


def test_formats_follow_image_transport():
    assert compressed_format("bgr8") == "bgr8; jpeg compressed bgr8"
    assert compressed_format("mono8") == "mono8; jpeg compressed mono8"


def test_only_the_subscribed_twin_is_made(node):
    with ImagePublisher(node, "twins_raw_only", width=WIDTH, height=HEIGHT, encoding="bgr8", memory="host") as pub, \
            received(node, Image, "twins_raw_only/cpu") as raw, spinning(node) as executor:
        assert spin_until(executor, lambda: pub.twins.subscription_counts()["/twins_raw_only/cpu"] > 0)
        publish(pub, smooth_pattern(0), "host")
        assert spin_until(executor, lambda: raw)
        stats = pub.fallback_stats()
        assert (stats["downloads"], stats["encodes"], stats["warm_ups"]) == (1, 0, 0)  # the raw twin needs none


def test_fallback_false_advertises_no_twin_and_16_bit_images_no_jpeg(node):
    with ImagePublisher(node, "twins_off", width=8, height=8, encoding="mono8", fallback=False) as off, \
            ImagePublisher(node, "twins_16", width=8, height=8, encoding="mono16") as deep:
        assert off.twins is None and off.fallback_stats() == {}
        assert node.count_publishers("twins_off/cpu") == 0
        assert deep.twins.topics == ("/twins_16/cpu",)


def test_renamed_twin_and_quality_from_the_node_parameter(node):
    import rclpy
    from rclpy.parameter import Parameter

    own = rclpy.create_node("twins_quality", parameter_overrides=[Parameter("jpeg_quality", value=40)],
                            automatically_declare_parameters_from_overrides=True)
    try:
        with ImagePublisher(own, "twins_named", width=8, height=8, encoding="rgb8", fallback_topic="plain/image") as pub:
            assert pub.twins.topics == ("plain/image", "plain/image/compressed")
            assert pub.jpeg_quality == 40
        own.set_parameters([Parameter("jpeg_quality", value=101)])
        with pytest.raises(ValueError, match="jpeg_quality 101"):
            ImagePublisher(own, "twins_bad", width=8, height=8, encoding="rgb8")
    finally:
        own.destroy_node()


def test_fallback_rate_limits_the_twin(node):
    with ImagePublisher(node, "twins_rate", width=WIDTH, height=HEIGHT, encoding="rgb8", memory="host",
                        reuse_delay=0, fallback_rate=0.001) as pub, \
            received(node, Image, "twins_rate/cpu") as raw, spinning(node) as executor:
        assert spin_until(executor, lambda: pub.twins.subscription_counts()["/twins_rate/cpu"] > 0)
        for seq in range(3):
            publish(pub, smooth_pattern(seq), "host")
        assert spin_until(executor, lambda: raw)
        stats = pub.fallback_stats()
        assert (stats["leased"], stats["rate_skips"]) == (1, 2)  # one frame per 1000 s


def unreachable_copy(msg):
    """``msg`` as if it came from a publisher whose pool this process cannot reach: another pool id, its socket
    named as a live process's pool socket is (so the reader tries it), and nothing listening there."""
    from ros2_cuda_ipc_msgs.msg import GpuImage

    pool_id = bytes([7] * 16)
    other = GpuImage(header=msg.header, dtype=msg.dtype, shape=msg.shape, strides=msg.strides, encoding=msg.encoding)
    other.core = type(msg.core)(socket_path=pool_socket_path(pool_id, os.getpid(), None), pool_id=list(pool_id),
                                block_id=0, uid=msg.core.uid, publisher_pid=os.getpid(), memory=msg.core.memory,
                                byte_size=msg.core.byte_size)
    return other


@pytest.mark.parametrize("fallback", ["auto", "never"])
def test_a_publisher_that_cannot_be_mapped_is_read_through_its_twin_once_or_refused(node, fallback):
    from ros2_cuda_ipc_msgs.msg import GpuImage

    got = []

    def keep(view):
        got.append((view.header.frame_id, np.array(view)))
        view.close()

    with ImagePublisher(node, f"twins_route_{fallback}", width=WIDTH, height=HEIGHT, encoding="rgb8", memory="host",
                        fallback=True) as pub, \
            ImageSubscription(node, f"twins_route_{fallback}", keep, fallback=fallback) as sub, \
            spinning(node) as executor:
        forger = node.create_publisher(GpuImage, f"twins_route_{fallback}", 10)
        assert spin_until(executor, lambda: pub.subscription_count > 0)
        header = Header(frame_id="first")
        msg = pub.publish_array(smooth_pattern(1), header=header)  # read zero-copy
        assert spin_until(executor, lambda: len(got) == 1)
        forger.publish(unreachable_copy(msg))  # its twin had no subscriber yet: it never comes
        if fallback == "never":
            forger.publish(unreachable_copy(msg))
        if fallback == "auto":
            assert spin_until(executor, lambda: sub.stats()["twin_subscribed"])
            assert spin_until(executor, lambda: pub.twins.subscription_counts()[pub.twins.topics[0]] > 0)
            msg = pub.publish_array(smooth_pattern(2), header=Header(frame_id="second"))
            for _ in range(2):  # the unreachable publisher's frame twice: delivered once
                forger.publish(unreachable_copy(msg))
            assert spin_until(executor, lambda: len(got) == 3)  # second: zero-copy and through the twin
            spin_until(executor, lambda: False, timeout=0.5)
            assert [name for name, _ in got] == ["first", "second", "second"]
            assert all(np.array_equal(image, smooth_pattern(2)) for _, image in got[1:])
            stats = sub.stats()
            assert stats["frames"] == {"zero_copy": 2, "fallback": 1, "refused": 0}
        else:
            assert spin_until(executor, lambda: sub.stats()["frames"]["refused"] == 2)
            stats = sub.stats()
            assert len(got) == 1 and not stats["twin_subscribed"] and stats["frames"]["fallback"] == 0
        (reason,) = stats["by_reason"]
        assert "nothing listens" in reason
        assert list(sub.routes().values())[-1].path == ("fallback" if fallback == "auto" else "refused")
        node.destroy_publisher(forger)
