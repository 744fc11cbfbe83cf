"""The bag's bytes are what a ROS 2 publisher sends: rosbags' serializer against rclpy's, and the definitions of
types rosbags does not ship (ours) read from the installed ``.msg`` files.  One process, no DDS."""

from __future__ import annotations

import numpy as np
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.rosbag2 import Reader
from sensor_msgs.msg import Image

from ros2_cuda_ipc_msgs.msg import GpuImage
from ros2_cuda_ipc_tools.bag import MessageTypes, SplitBagWriter


def test_rosbags_serializes_an_image_as_rclpy_does() -> None:
    types = MessageTypes()
    for width in (4, 5, 6, 7):  # every alignment of the data after the encoding string
        data = np.arange(width * 3, dtype=np.uint8) % 251
        header = types.new("std_msgs/msg/Header", stamp=types.new("builtin_interfaces/msg/Time", sec=7, nanosec=9),
                           frame_id="cam")
        ours = bytes(types.serialize(types.new("sensor_msgs/msg/Image", header=header, height=1, width=width,
                                               encoding="rgb8", is_bigendian=0, step=width * 3, data=data),
                                     "sensor_msgs/msg/Image"))
        msg = Image()
        msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = 7, 9, "cam"
        msg.height, msg.width, msg.encoding, msg.step, msg.data = 1, width, "rgb8", width * 3, data.tobytes()
        theirs = serialize_message(msg)
        assert len(ours) == len(theirs)
        assert deserialize_message(ours, Image) == msg
        # Equal but for alignment padding, which rclpy leaves uninitialised and rosbags zeroes.
        assert ours[4:] == theirs[4:] or sum(a != b for a, b in zip(ours, theirs, strict=True)) <= 3


def test_a_type_rosbags_does_not_ship_is_read_from_its_msg_file() -> None:
    types = MessageTypes()
    assert not types.known("ros2_cuda_ipc_msgs/msg/GpuImage")
    types.ensure("ros2_cuda_ipc_msgs/msg/GpuImage")
    assert types.known("ros2_cuda_ipc_msgs/msg/BufferCore")
    msg = GpuImage()
    msg.encoding, msg.core.byte_size, msg.core.socket_path = "rgb8", 12345, "@pool"
    decoded = types.store.deserialize_cdr(serialize_message(msg), "ros2_cuda_ipc_msgs/msg/GpuImage")
    assert (decoded.encoding, decoded.core.byte_size, decoded.core.socket_path) == ("rgb8", 12345, "@pool")
    assert types.store.hash_rihs01("ros2_cuda_ipc_msgs/msg/GpuImage").startswith("RIHS01_")


def test_split_writer_files_are_one_bag(tmp_path) -> None:
    types = MessageTypes()
    bag = tmp_path / "parts"
    sink = SplitBagWriter(bag, "mcap", max_bytes=1000)
    msgdef, _ = types.store.generate_msgdef("std_msgs/msg/String", ros_version=2)
    sink.add_topic("/t", "std_msgs/msg/String", msgdef, types.store.hash_rihs01("std_msgs/msg/String"))
    for i in range(50):
        sink.write("/t", 10**18 + i, types.serialize(types.new("std_msgs/msg/String", data="x" * 100 + str(i)),
                                                     "std_msgs/msg/String"))
    sink.close()
    assert sorted(p.name for p in bag.iterdir()) == sorted(["metadata.yaml",
                                                            *(f"parts_{n}.mcap" for n in range(sink.files))])
    assert sink.files >= 5
    with Reader(bag) as reader:
        assert reader.message_count == 50
        got = [types.store.deserialize_cdr(raw, c.msgtype).data for c, _, raw in reader.messages()]
    assert got == ["x" * 100 + str(i) for i in range(50)]
