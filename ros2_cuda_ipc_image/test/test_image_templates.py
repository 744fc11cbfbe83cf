"""An ImageSubscription reads a DDS message whose layout fields repeat an earlier one's without deserializing it:
every frame still arrives with its own header, its own block and its own layout, from two publishers of two sizes
interleaved on one topic; only the first message of each is deserialized.  Real rclpy, host memory."""

import numpy as np
from spinning import spin_until, spinning

from ros2_cuda_ipc_image import ImagePublisher, ImageSubscription

SIZES = ((64, 48), (40, 30))


def test_interleaved_layouts_each_frame_with_its_own_header_block_and_shape(node):
    seen = []

    def on_view(view):
        with view:
            seen.append((view.header.frame_id, view.header.stamp.sec, np.asarray(view).copy()))

    subscription = ImageSubscription(node, "templated_images", on_view, fallback="never")
    publishers = [ImagePublisher(node, "templated_images", width=w, height=h, encoding="rgb8", memory="host",
                                 reuse_delay=0, fallback=False) for w, h in SIZES]
    sent = []
    with spinning(node) as executor:
        assert spin_until(executor, lambda: all(p.subscription_count for p in publishers), 30)
        for seq in range(12):
            publisher = publishers[seq % 2]
            frame = publisher.borrow(timeout=5)
            with frame:
                np.asarray(frame)[...] = seq
                header = type(frame.publisher.message_type().header)(frame_id=f"cam{seq % 2}/{seq}")
                header.stamp.sec = 1000 + seq
                frame.publish(header=header)
            sent.append((f"cam{seq % 2}/{seq}", 1000 + seq, SIZES[seq % 2]))
            assert spin_until(executor, lambda: len(seen) == len(sent), 10), (seen, sent)
    got = [(frame_id, sec, (pixels.shape[1], pixels.shape[0])) for frame_id, sec, pixels in seen]
    assert got == sent
    assert all((pixels == seq).all() for seq, (_, _, pixels) in enumerate(seen))
    stats = subscription.stats()
    assert stats["frames"]["zero_copy"] == 12
    # A frame_id one character longer moves the layout fields to another alignment: a key of its own, so the
    # frame ids here keep their length within each publisher ("cam0/0".."cam0/8", then "cam0/10" a new one).
    assert stats["dds_deserialized"] == 4, stats
    subscription.close()
    for publisher in publishers:
        publisher.close()
