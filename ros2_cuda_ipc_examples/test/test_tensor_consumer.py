"""A tensor consumer drops, and counts, a GpuTensor that is not a batch of images: another publisher's tensor on
its topic must not end the node."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.parameter import Parameter

from ros2_cuda_ipc_examples.nodes.inference import InferenceLike
from ros2_cuda_ipc_tensor import TensorPublisher

NOT_IMAGES = [
    ((5,), np.float32, None),  # a vector
    ((1, 3, 8, 8), np.float32, (0, 3, 8, 8)),  # an empty batch
    ((1, 1, 8, 8), np.float32, None),  # one channel
    ((1, 3, 8, 8), np.complex64, None),  # a type no image has
]


@pytest.mark.parametrize(("capacity", "dtype", "sent"), NOT_IMAGES)
def test_a_tensor_that_is_no_image_batch_is_counted_bad_not_raised(node, capacity, dtype, sent):
    consumer = InferenceLike(parameter_overrides=[Parameter("model", value="tiny")])
    try:
        with TensorPublisher(node, "not_images", shape=capacity, dtype=dtype, memory="host") as publisher:
            frame = publisher.borrow(shape=sent)
            with frame:
                msg = frame.publish()
            consumer._on_tensor(msg)  # the subscription's callback, as the executor calls it
        assert (consumer.counts["in"], consumer.counts["bad"], consumer.counts["out"]) == (1, 1, 0)
        assert consumer.reader.stats()["leases_held"] == 0
    finally:
        consumer.destroy_node()
