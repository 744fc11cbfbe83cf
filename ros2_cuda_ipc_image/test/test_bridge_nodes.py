"""The bridge nodes, in one process with real rclpy publishers and subscriptions."""

import numpy as np
import pytest
import rclpy
from block_reuse import BAD_REUSE_DELAYS
from gpu_marks import MEMORIES
from sensor_msgs.msg import Image
from spinning import publishing, received, spin_until, spinning

from ros2_cuda_ipc_image import ImagePublisher
from ros2_cuda_ipc_image.nodes import GpuToImage, ImageToGpu
from ros2_cuda_ipc_msgs.msg import GpuImage


def write_frame(frame, pattern, memory):
    if memory == "host":
        frame.array[...] = pattern
    else:
        import torch

        torch.from_dlpack(frame).copy_(torch.from_numpy(pattern).cuda())
        torch.cuda.synchronize()


@pytest.mark.parametrize("memory", MEMORIES)
def test_gpu_to_image_downloads_what_the_publisher_wrote(node, memory):
    bridge = GpuToImage()
    pattern = np.random.default_rng(7).integers(0, 256, size=(30, 40, 4), dtype=np.uint8)
    with received(node, Image, "image") as got, spinning(node, bridge) as executor, \
            ImagePublisher(node, "gpu_image", width=40, height=30, encoding="rgba8", row_alignment=256,
                           memory=memory) as pub:
        assert spin_until(executor, lambda: pub._publisher.get_subscription_count() > 0)
        assert spin_until(executor, lambda: bridge.listeners > 0)
        frame = pub.borrow()
        write_frame(frame, pattern, memory)
        frame.publish()
        assert spin_until(executor, lambda: got)
        image = got[0]
        assert (image.height, image.width, image.encoding) == (30, 40, "rgba8")
        rows = np.frombuffer(bytes(image.data), np.uint8).reshape(30, image.step)[:, : 40 * 4]
        np.testing.assert_array_equal(rows.reshape(30, 40, 4), pattern)
        assert bridge.converted == 1


def test_gpu_to_image_downloads_nothing_without_subscribers(node):
    bridge = GpuToImage()
    with spinning(node, bridge) as executor, \
            ImagePublisher(node, "gpu_image", width=4, height=4, encoding="mono8", memory="host") as pub:
        assert spin_until(executor, lambda: pub._publisher.get_subscription_count() > 0)
        pub.borrow().publish()
        assert spin_until(executor, lambda: bridge.skipped == 1)
        assert bridge.converted == 0 and bridge.reader.stats()["reads"] == 0


def test_image_to_gpu_publishes_frames(node):
    bridge = ImageToGpu(parameter_overrides=[rclpy.parameter.Parameter("memory", value="host"),
                                             rclpy.parameter.Parameter("reuse_delay", value=0)])  # as reuse_delay:=0
    with received(node, GpuImage, "gpu_image") as got, publishing(node, Image, "image") as cam, \
            spinning(node, bridge) as executor:
        assert spin_until(executor, lambda: cam.get_subscription_count() > 0)
        msg = Image(height=2, width=3, encoding="mono8", step=4)
        msg.data = bytes(range(8))
        cam.publish(msg)
        assert spin_until(executor, lambda: got)
        assert list(got[0].shape) == [2, 3, 1] and list(got[0].strides) == [4, 1, 1]
        assert bridge.publisher is not None and bridge.publisher.pool.memory == "host"
        assert bridge.publisher.pool.reuse_delay == 0


@pytest.mark.parametrize("delay", [*BAD_REUSE_DELAYS, "soon"])
def test_image_to_gpu_refuses_a_bad_reuse_delay_by_name(delay):
    with pytest.raises(ValueError, match="reuse_delay must be"):
        ImageToGpu(parameter_overrides=[rclpy.parameter.Parameter("reuse_delay", value=delay)])
