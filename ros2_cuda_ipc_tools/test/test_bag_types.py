"""The bag's bytes are what a ROS 2 publisher sends: rosbags' serializer against rclpy's, the CDR bag_record
encodes around a payload against rosbags', bag_record's own MCAP files read back by the mcap library and
rosbags, the definitions of types rosbags does not ship (ours) read from the installed ``.msg`` files, and the
player's clock over hostile stamps.  One process, no DDS."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.rosbag2 import Reader
from sensor_msgs.msg import Image

from ros2_cuda_ipc_msgs.msg import GpuImage
from ros2_cuda_ipc_tools.bag import MessageTypes, SplitBagWriter
from ros2_cuda_ipc_tools.bag.cdr_frames import CdrField, CdrStamp, cloud_cdr, image_cdr, parse_cloud, parse_image
from ros2_cuda_ipc_tools.bag.play_timing import PlayClock


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


def _image(types: MessageTypes, width: int, frame_id: str, encoding: str) -> object:
    header = types.new("std_msgs/msg/Header", stamp=types.new("builtin_interfaces/msg/Time", sec=-3, nanosec=7),
                       frame_id=frame_id)
    return types.new("sensor_msgs/msg/Image", header=header, height=2, width=width, encoding=encoding,
                     is_bigendian=0, step=width, data=np.arange(2 * width, dtype=np.uint8))


@pytest.mark.parametrize("frame_id", ["", "c", "cam", "camera", "optical_frame"])
def test_the_cdr_around_a_payload_is_rosbags_bytes_and_rclpy_reads_it(frame_id) -> None:
    types = MessageTypes()
    for width, encoding in ((5, "mono8"), (6, "rgb8"), (7, "32FC1")):  # every alignment after the strings
        ours = image_cdr(CdrStamp(-3, 7, frame_id), 2, width, encoding, False, width, 2 * width)
        data = np.arange(2 * width, dtype=np.uint8)
        message = ours.prefix + data.tobytes() + ours.suffix
        assert message == bytes(types.serialize(_image(types, width, frame_id, encoding), "sensor_msgs/msg/Image"))
        assert deserialize_message(message, Image).data.tobytes() == data.tobytes()
        parsed = parse_image(message)
        assert (parsed.header, parsed.encoding, parsed.step, bytes(parsed.data)) == \
            (CdrStamp(-3, 7, frame_id), encoding, width, data.tobytes())
    fields = [CdrField("x", 0, 7, 1), CdrField("intensity", 4, 7, 1), CdrField("ring", 8, 4, 1)]
    cloud = cloud_cdr(CdrStamp(5, 6, frame_id), 1, 3, fields, False, 12, 36, 36, True)
    data = np.arange(36, dtype=np.uint8)
    expected = types.new("sensor_msgs/msg/PointCloud2", header=types.new(
        "std_msgs/msg/Header", stamp=types.new("builtin_interfaces/msg/Time", sec=5, nanosec=6), frame_id=frame_id),
        height=1, width=3, fields=[types.new("sensor_msgs/msg/PointField", name=f.name, offset=f.offset,
                                             datatype=f.datatype, count=f.count) for f in fields],
        is_bigendian=False, point_step=12, row_step=36, data=data, is_dense=True)
    message = cloud.prefix + data.tobytes() + cloud.suffix
    assert message == bytes(types.serialize(expected, "sensor_msgs/msg/PointCloud2"))
    parsed_cloud = parse_cloud(message)
    assert parsed_cloud.fields == fields and parsed_cloud.is_dense and bytes(parsed_cloud.data) == data.tobytes()


@pytest.mark.parametrize("cut", [0, 3, 10, 30, -1])
def test_parsing_refuses_bytes_that_are_not_the_message(cut) -> None:
    good = image_cdr(CdrStamp(1, 2, "cam"), 2, 4, "mono8", False, 4, 8)
    message = good.prefix + bytes(8)
    with pytest.raises(ValueError):
        parse_image(message[:cut])
    lying = bytearray(message)
    lying[-12:-8] = (2**32 - 1).to_bytes(4, "little")  # a data length of 4 GiB in an 8-byte payload
    with pytest.raises(ValueError, match="beyond the message"):
        parse_image(bytes(lying))


def test_mcap_file_every_message_read_back_by_mcap_and_rosbags(tmp_path) -> None:
    """Messages above the chunk size go to the file from the caller's buffers; small ones share chunks."""
    from mcap.reader import make_reader

    types = MessageTypes()
    bag = tmp_path / "direct"
    sink = SplitBagWriter(bag, "mcap")
    for topic, msgtype in (("/image", "sensor_msgs/msg/Image"), ("/text", "std_msgs/msg/String")):
        sink.add_topic(topic, msgtype, types.store.generate_msgdef(msgtype, ros_version=2)[0],
                       types.store.hash_rihs01(msgtype))
    expected = {}
    for i in range(12):
        width = 1000 + 300 * i  # 1 to 4 MB: each its own chunk
        payload = np.random.default_rng(i).integers(0, 256, (1000, width), dtype=np.uint8)
        cdr = image_cdr(CdrStamp(i, 0, "cam"), 1000, width, "mono8", False, width, payload.size)
        sink.write("/image", 10**18 + 2 * i, [cdr.prefix, payload, cdr.suffix], cdr.size)
        expected[("/image", 10**18 + 2 * i)] = cdr.prefix + payload.tobytes() + cdr.suffix
        text = bytes(types.serialize(types.new("std_msgs/msg/String", data=f"note {i}"), "std_msgs/msg/String"))
        sink.write("/text", 10**18 + 2 * i + 1, text)
        expected[("/text", 10**18 + 2 * i + 1)] = text
    sink.close()
    with Reader(bag) as reader:
        assert {(c.topic, t): bytes(d) for c, t, d in reader.messages()} == expected
    with (bag / "direct_0.mcap").open("rb") as stream:
        mcap = make_reader(stream, validate_crcs=True)
        got = {(channel.topic, message.log_time): bytes(message.data) for _, channel, message in mcap.iter_messages()}
        summary = mcap.get_summary()
    assert got == expected
    assert summary is not None and summary.statistics is not None and summary.statistics.message_count == 24
    assert summary.statistics.channel_message_counts == {1: 12, 2: 12}


def test_play_clock_skips_a_gap_beyond_max_gap_and_plays_backward_stamps_at_once() -> None:
    clock = PlayClock(rate=1e12, max_gap_ns=5 * 10**9)  # a rate this high never sleeps: only the gaps are looked at
    stamps = [10**18, 10**18 + 10**9, 2**63 - 1, 2**63 - 1 + 0, 0, 2**63 - 1 + 10**9]
    gaps = [clock.wait_for(t) for t in stamps]
    assert gaps == [None, None, 2**63 - 1 - (10**18 + 10**9), None, None, None]
    assert clock.position == 10**9 + 10**9
