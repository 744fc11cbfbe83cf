"""bag_record and bag_play as a user runs them: real processes, real DDS, bags read back with rosbags alone.

The camera peer (bag_peer.py) publishes frame ``i`` with stamp ``(1000 + i, i)`` and bytes drawn from a
generator seeded with ``i``, so every message of a bag is checked against what its frame held.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from bag_peer import CLOUD_TOPIC, IMAGE_TOPIC, NOTE_TOPIC, cloud_bytes, image_bytes
from bag_tools import TYPES, counts_of, peer, tool
from gpu_marks import NO_GPU
from peers import line_with
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from ruamel.yaml import YAML

WIDTH, HEIGHT = 640, 480


def record(bag: Path, frames: int, rate: float, *extra: str, stop_after: float | None = None, width: int = WIDTH,
           height: int = HEIGHT) -> dict:
    """Record the camera peer's ``frames`` into ``bag``; SIGINT the recorder once the camera is done (or
    ``stop_after`` seconds after it started publishing).  What each side said."""
    start_time = time.time_ns()
    recorder = tool("record", "-o", str(bag), IMAGE_TOPIC, CLOUD_TOPIC, NOTE_TOPIC, *extra)
    camera = peer("camera", str(frames), str(width), str(height), str(rate))
    try:
        assert json.loads(camera.stdout.readline()) == {"ready": True}
        if stop_after is not None:
            time.sleep(stop_after)
            published = None
        else:
            published = json.loads(camera.communicate(timeout=240)[0].strip().splitlines()[-1])
        stop_time = time.time_ns()
        recorder.send_signal(signal.SIGINT)
        out, err = recorder.communicate(timeout=60)
    finally:
        camera.kill()
        recorder.kill()
        camera.wait()
    assert recorder.returncode == 0, err
    return {"published": published, "counts": counts_of(out), "out": out, "err": err,
            "window": (start_time, stop_time), "size": (width, height)}


def bag_messages(bag: Path) -> dict[str, list[tuple[int, object]]]:
    """topic -> [(bag time, message)], read with rosbags alone."""
    got: dict[str, list[tuple[int, object]]] = {}
    with Reader(bag) as reader:
        for connection, timestamp, raw in reader.messages():
            got.setdefault(connection.topic, []).append((timestamp, TYPES.deserialize_cdr(raw, connection.msgtype)))
    return got


def check_bag(bag: Path, result: dict) -> None:
    """Every message of ``bag`` is the frame its stamp names, byte for byte; counts are what bag_record said."""
    counts, published, window = result["counts"], result["published"], result["window"]
    width, height = result["size"]
    got = bag_messages(bag)
    for topic, key in ((IMAGE_TOPIC, "images"), (CLOUD_TOPIC, "clouds")):
        messages = got.get(topic, [])
        assert len(messages) == counts[topic]["written"]
        if published is not None:
            assert counts[topic]["written"] == published[key] - counts[topic]["dropped"] - counts[topic]["failed"]
        indices = [m.header.stamp.sec - 1000 for _, m in messages]
        assert indices == sorted(set(indices))  # each frame once, in order
        for timestamp, m in messages:
            i = m.header.stamp.sec - 1000
            assert m.header.stamp.nanosec == i
            if topic == IMAGE_TOPIC:
                assert (m.height, m.width, m.encoding, m.step) == (height, width, "rgb8", width * 3)
                assert np.array_equal(m.data, image_bytes(i, height, width).reshape(-1)), f"image {i}"
                assert m.header.frame_id == "camera"
            else:
                assert (m.height, m.width, m.point_step) == (16, 128, 48)
                assert [f.name for f in m.fields] == ["x", "y", "z", "intensity", "t", "reflectivity", "ring",
                                                      "ambient", "range"]
                assert np.array_equal(m.data, cloud_bytes(i)), f"cloud {i}"
            assert window[0] < timestamp < window[1]  # the bag time is when it was received, not its stamp


def check_with_mcap(bag: Path, result: dict) -> None:
    """The bag as the MCAP project's reader sees it (CRCs checked): rosbag2's profile, schemas, channel metadata
    and indexes, and every message byte for byte what rosbags' serializer makes of the frame its stamp names."""
    from mcap.reader import make_reader

    width, height = result["size"]
    with Reader(bag) as reader:
        raw = {(c.topic, t): bytes(data) for c, t, data in reader.messages()}
    seen = 0
    for path in sorted(bag.glob("*.mcap")):
        with path.open("rb") as stream:
            mcap = make_reader(stream, validate_crcs=True)
            assert mcap.get_header().profile == "ros2"
            summary = mcap.get_summary()
            assert summary is not None and summary.statistics is not None
            assert summary.chunk_indexes and all(c.message_index_length > 0 for c in summary.chunk_indexes)
            for channel in summary.channels.values():
                schema = summary.schemas[channel.schema_id]
                assert (schema.encoding, channel.message_encoding) == ("ros2msg", "cdr")
                assert channel.metadata["topic_type_hash"] == TYPES.hash_rihs01(schema.name)
                assert "offered_qos_profiles" in channel.metadata
                assert schema.data.decode() == TYPES.generate_msgdef(schema.name, ros_version=2)[0]
            (stored,) = [m for m in mcap.iter_metadata() if m.name == "rosbag2"]
            info = YAML(typ="safe").load(stored.metadata["serialized_metadata"])
            assert info["version"] == 9 and info["relative_file_paths"] == [path.name]
            count = 0
            for schema, channel, message in mcap.iter_messages(log_time_order=True):
                data = bytes(message.data)
                assert raw[(channel.topic, message.log_time)] == data
                decoded = TYPES.deserialize_cdr(data, schema.name)
                if channel.topic == IMAGE_TOPIC:
                    decoded.data = image_bytes(decoded.header.stamp.sec - 1000, height, width).reshape(-1)
                elif channel.topic == CLOUD_TOPIC:
                    decoded.data = cloud_bytes(decoded.header.stamp.sec - 1000)
                if channel.topic != NOTE_TOPIC:  # the notes are the publisher's own bytes (its padding too)
                    assert bytes(TYPES.serialize_cdr(decoded, schema.name)) == data, (channel.topic, message.log_time)
                count += 1
            assert count == summary.statistics.message_count
            seen += count
    assert seen == len(raw) == sum(c["written"] for c in result["counts"].values())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict]:
    """300 frames of 640x480 rgb8 and an Ouster-layout cloud each, at 30 Hz, recorded to MCAP."""
    bag = tmp_path_factory.mktemp("bags") / "fanout"
    return bag, record(bag, 300, 30.0)


def test_recorded_mcap_reads_back_with_rosbags_frame_for_frame(recorded) -> None:
    bag, result = recorded
    assert result["counts"][IMAGE_TOPIC]["written"] > 0
    assert sorted(p.name for p in bag.iterdir()) == ["fanout_0.mcap", "metadata.yaml"]
    check_bag(bag, result)
    check_with_mcap(bag, result)
    assert "dropped" in result["err"] and "queue" in result["err"]  # the live status line
    for topic, counts in result["counts"].items():  # each drop's cause is in the final table, adding up
        causes = re.search(rf"^dropped on {topic}: (.*)$", result["out"], re.MULTILINE)
        assert (causes is None) == (counts["dropped"] == 0), result["out"]
        if causes:
            assert sum(int(part.split()[0]) for part in causes.group(1).split(", ")) == counts["dropped"]
    notes = bag_messages(bag)[NOTE_TOPIC]  # a std_msgs/String topic, stored as it came
    assert len(notes) == result["counts"][NOTE_TOPIC]["written"] == 300 - result["counts"][NOTE_TOPIC]["dropped"]
    indices = [int(m.data.removeprefix("frame ")) for _, m in notes]
    assert indices == sorted(set(indices)) and set(indices) <= set(range(300))


def test_frames_larger_than_a_chunk_are_written_from_their_blocks_every_byte_read_back(tmp_path) -> None:
    """1280x720 rgb8 (2.8 MB) at 30 Hz: each frame is a chunk of its own, written from its leased block."""
    bag = tmp_path / "large"
    result = record(bag, 45, 30.0, "--quiet", width=1280, height=720)
    assert result["counts"][IMAGE_TOPIC]["written"] > 0
    check_bag(bag, result)
    check_with_mcap(bag, result)


def test_sqlite3_storage(tmp_path) -> None:
    bag = tmp_path / "lite"
    result = record(bag, 40, 40.0, "--storage", "sqlite3", "--quiet")
    assert sorted(p.name for p in bag.iterdir()) == ["lite_0.db3", "metadata.yaml"]
    check_bag(bag, result)


def test_max_bag_size_splits_into_files_one_bag_lists(tmp_path) -> None:
    bag = tmp_path / "split"
    result = record(bag, 40, 40.0, "--max-bag-size", "8000000", "--quiet")
    files = sorted(p.name for p in bag.glob("*.mcap"))
    assert len(files) >= 3, files
    with Reader(bag) as reader:
        assert reader.message_count == sum(c["written"] for c in result["counts"].values())
    check_bag(bag, result)
    check_with_mcap(bag, result)  # each file stands alone too: its own index, summary and metadata record


def test_sigint_mid_recording_leaves_a_readable_bag_with_every_message_written(tmp_path) -> None:
    bag = tmp_path / "stopped"
    result = record(bag, 600, 30.0, "--quiet", stop_after=3.0)
    written = result["counts"][IMAGE_TOPIC]["written"]
    assert 0 < written < 600
    check_bag(bag, result)


@pytest.mark.skipif(not hasattr(__import__("ros2_cuda_ipc_core"), "encode_jpeg"),
                    reason="the JPEG encoder of the compressed twins (ros2_cuda_ipc_core.encode_jpeg) is not here")
def test_compressed_decodes_within_jpeg_tolerance(tmp_path) -> None:
    import io

    from PIL import Image

    bag = tmp_path / "jpeg"
    result = record(bag, 20, 20.0, "--compressed", "--jpeg-quality", "95", "--quiet")
    messages = bag_messages(bag)[IMAGE_TOPIC]
    assert len(messages) == result["counts"][IMAGE_TOPIC]["written"] > 0
    for _, m in messages:
        assert m.format == "rgb8; jpeg compressed bgr8"
        decoded = np.asarray(Image.open(io.BytesIO(m.data.tobytes())).convert("RGB")).astype(int)
        # Random pixels are JPEG's worst case: compare the 8x8 block means, what the encoding keeps.
        expected = image_bytes(m.header.stamp.sec - 1000, HEIGHT, WIDTH).astype(int)
        blocks = (decoded - expected).reshape(HEIGHT // 8, 8, WIDTH // 8, 8, 3).mean(axis=(1, 3))
        assert np.abs(blocks).mean() < 4


def play_into_checker(bag: Path, frames: int, *args: str, height: int = HEIGHT) -> tuple[dict, str]:
    checker = peer("checker", str(frames), "90", str(WIDTH), str(height))
    try:
        assert json.loads(checker.stdout.readline()) == {"ready": True}
        # Pools deep enough that a checker on a busy machine reads every frame before its block is reused.
        player = tool("play", str(bag), "--memory", "host", "--wait-for-subscribers", "30", "--block-count", "64",
                      *args)
        out, err = player.communicate(timeout=120)
        assert player.returncode == 0, err
        seen = json.loads(checker.communicate(timeout=120)[0].strip().splitlines()[-1])
    finally:
        checker.kill()
    return seen, out


def test_bag_play_replays_every_frame_into_pools(recorded) -> None:
    bag, result = recorded
    frames = result["counts"][IMAGE_TOPIC]["written"]
    seen, out = play_into_checker(bag, frames, "--rate", "0.5")  # the checker checks every byte: give it time
    assert seen["bad"] == []
    assert seen["images"] == frames and seen["clouds"] == result["counts"][CLOUD_TOPIC]["written"]
    assert seen["stamps"] == sorted(seen["stamps"])
    assert seen["memory"] == ["host"]
    messages = sum(c["written"] for c in result["counts"].values())  # the notes too, republished as they are
    assert f"played {messages} messages, dropped 0, bad 0" in out


def test_a_subscriber_running_before_the_replay_gets_every_frame(tmp_path) -> None:
    """No --wait-for-subscribers: bag_play waits by default until the subscribers already on the graph match."""
    bag = tmp_path / "early"
    write_plain_bag(bag, 20, WIDTH * 3)
    checker = peer("checker", "20", "60", str(WIDTH), str(HEIGHT))
    try:
        assert json.loads(checker.stdout.readline()) == {"ready": True}
        player = tool("play", str(bag), "--memory", "host", "--block-count", "64")
        out, err = player.communicate(timeout=120)
        seen = json.loads(checker.communicate(timeout=120)[0].strip().splitlines()[-1])
    finally:
        checker.kill()
    assert player.returncode == 0, err
    assert "played 40 messages, dropped 0, bad 0" in out
    assert (seen["images"], seen["clouds"], seen["bad"]) == (20, 20, [])


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_replay_prints_its_summary_and_remap_warns_of_nothing(tmp_path, stop) -> None:
    bag = tmp_path / "long"
    write_plain_bag(bag, 60, WIDTH * 3)  # 6 s of bag time
    player = tool("play", str(bag), "--memory", "host", "--wait-for-matched", "0", "--remap",
                  f"{IMAGE_TOPIC}:=/replayed/image")
    line_with(player.stderr, "| played")  # the first progress line: playing
    player.send_signal(stop)
    out, err = player.communicate(timeout=60)
    assert player.returncode == 0, err
    assert re.search(r"played \d+ messages, dropped 0, bad 0 in [0-9.]+ s \(stopped\)", out), out
    assert "deprecated" not in err and "Traceback" not in err, err


def test_rate_two_plays_in_about_half_the_time(tmp_path) -> None:
    bag = tmp_path / "timed"
    write_plain_bag(bag, 31, WIDTH * 3)  # 3 s of bag time
    seen, _ = play_into_checker(bag, 31, "--rate", "2")
    assert seen["images"] == 31 and seen["bad"] == []
    assert 0.9 < seen["span"] < 2.4, seen["span"]  # 1.5 s at rate 2 (asserted loosely: the machine is shared)


def write_plain_bag(path: Path, frames: int, step: int) -> None:
    """A bag as ``ros2 bag record`` of an ordinary camera and LiDAR driver writes it: plain sensor_msgs, rows
    padded to ``step`` bytes, 10 frames a second, written by rosbags alone."""
    Image, Header = TYPES.types["sensor_msgs/msg/Image"], TYPES.types["std_msgs/msg/Header"]
    Time, Cloud = TYPES.types["builtin_interfaces/msg/Time"], TYPES.types["sensor_msgs/msg/PointCloud2"]
    Field = TYPES.types["sensor_msgs/msg/PointField"]
    fields = [Field(name=n, offset=o, datatype=d, count=1) for n, o, d in
              [("x", 0, 7), ("y", 4, 7), ("z", 8, 7), ("intensity", 16, 7), ("t", 20, 6), ("reflectivity", 24, 4),
               ("ring", 26, 4), ("ambient", 28, 4), ("range", 32, 6)]]
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        images = writer.add_connection(IMAGE_TOPIC, "sensor_msgs/msg/Image", typestore=TYPES)
        clouds = writer.add_connection(CLOUD_TOPIC, "sensor_msgs/msg/PointCloud2", typestore=TYPES)
        for i in range(frames):
            header = Header(stamp=Time(sec=1000 + i, nanosec=i), frame_id="camera")
            rows = np.zeros((HEIGHT, step), np.uint8)
            rows[:, : WIDTH * 3] = image_bytes(i, HEIGHT, WIDTH).reshape(HEIGHT, -1)
            image = Image(header=header, height=HEIGHT, width=WIDTH, encoding="rgb8", is_bigendian=0, step=step,
                          data=rows.reshape(-1))
            cloud = Cloud(header=header, height=16, width=128, fields=fields, is_bigendian=False, point_step=48,
                          row_step=48 * 128, data=cloud_bytes(i), is_dense=True)
            writer.write(images, 10**18 + i * 100_000_000, TYPES.serialize_cdr(image, "sensor_msgs/msg/Image"))
            writer.write(clouds, 10**18 + i * 100_000_000 + 1, TYPES.serialize_cdr(cloud, "sensor_msgs/msg/PointCloud2"))


def test_a_bag_written_by_rosbags_from_plain_messages_plays_the_same(tmp_path) -> None:
    bag = tmp_path / "plain"
    write_plain_bag(bag, 20, WIDTH * 3 + 64)
    seen, _ = play_into_checker(bag, 20)
    assert seen["bad"] == [] and seen["images"] == 20 and seen["clouds"] == 20


def test_a_hostile_message_is_counted_and_sizes_no_pool(tmp_path) -> None:
    bag = tmp_path / "hostile"
    Image, Header = TYPES.types["sensor_msgs/msg/Image"], TYPES.types["std_msgs/msg/Header"]
    Time = TYPES.types["builtin_interfaces/msg/Time"]
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        images = writer.add_connection(IMAGE_TOPIC, "sensor_msgs/msg/Image", typestore=TYPES)
        # 4 billion rows claimed, 12 bytes carried; then bytes that are no Image at all.
        liar = Image(header=Header(stamp=Time(sec=1, nanosec=0), frame_id=""), height=2**32 - 1, width=4,
                     encoding="mono8", is_bigendian=0, step=4, data=np.zeros(12, np.uint8))
        writer.write(images, 10**18, TYPES.serialize_cdr(liar, "sensor_msgs/msg/Image"))
        writer.write(images, 10**18 + 1, b"\x00\x01\x00\x00\xff\xff\xff\xff")
    player = tool("play", str(bag), "--memory", "host", "--linger", "0", "--wait-for-matched", "0")
    out, err = player.communicate(timeout=60)
    assert player.returncode == 0, err
    assert "played 0 messages, dropped 0, bad 2" in out
    assert "sizes no pool" in err


def _truncated(tmp_path: Path, recorded) -> Path:
    bag, _ = recorded
    broken = tmp_path / "broken"
    broken.mkdir()
    source = bag / "fanout_0.mcap"
    (broken / "fanout_0.mcap").write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    (broken / "metadata.yaml").write_text((bag / "metadata.yaml").read_text())
    return broken


@pytest.mark.parametrize("case", ["missing", "truncated", "not a bag", "unknown storage", "unknown topic",
                                  "rate 0", "rate -1", "rate nan", "unknown option"])
def test_bad_input_is_one_clear_line_and_exit_code_2(case, tmp_path, recorded) -> None:
    bag, _ = recorded
    args = {"missing": [str(tmp_path / "nothing")],
            "truncated": [str(_truncated(tmp_path, recorded)) if case == "truncated" else ""],
            "not a bag": [str(tmp_path)],
            "unknown storage": [str(tmp_path / "bag.bag")],
            "unknown topic": [str(bag), "--topics", "/no/such/topic"],
            "rate 0": [str(bag), "--rate", "0"], "rate -1": [str(bag), "--rate", "-1"],
            "rate nan": [str(bag), "--rate", "nan"], "unknown option": [str(bag), "--fast"]}[case]
    (tmp_path / "bag.bag").write_bytes(b"#ROSBAG V2.0\n")
    player = tool("play", *args, "--linger", "0", "--quiet")
    out, err = player.communicate(timeout=60)
    assert player.returncode == 2, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("bag_play")]
    assert len(lines) == 1 and "Traceback" not in err, err


@pytest.mark.skipif(NO_GPU is None, reason="a GPU is here: --memory cuda plays")
def test_memory_cuda_without_a_gpu_is_one_line_and_exit_code_2(recorded) -> None:
    bag, _ = recorded
    player = tool("play", str(bag), "--memory", "cuda", "--quiet")
    _, err = player.communicate(timeout=60)
    assert player.returncode == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("bag_play")]
    assert len(lines) == 1 and lines[0].startswith("bag_play: --memory cuda:"), err


def test_record_refuses_an_existing_bag_and_unknown_options(tmp_path) -> None:
    for args in (["-o", str(tmp_path), "/x"], ["-o", str(tmp_path / "new"), "/x", "--fast"], ["/x"]):
        recorder = tool("record", *args)
        _, err = recorder.communicate(timeout=60)
        assert recorder.returncode == 2, err
        assert "Traceback" not in err
    helped = tool("record", "--help")
    assert helped.communicate(timeout=60)[0].startswith("usage: bag_record") and helped.returncode == 0


def test_sigterm_closes_the_bag_of_a_recorder_waiting_for_topics(tmp_path) -> None:
    bag = tmp_path / "empty"
    recorder = tool("record", "-o", str(bag), "/nobody/publishes/this")
    line_with(recorder.stderr, "waiting for /nobody/publishes/this")  # its first status line: running
    recorder.send_signal(signal.SIGTERM)
    out, err = recorder.communicate(timeout=60)
    assert recorder.returncode == 0, err
    assert "0 messages" in out
    from rosbags.rosbag2 import Reader

    with Reader(bag) as reader:  # still a bag, as ros2 bag record leaves one: its file and metadata
        assert reader.message_count == 0 and list(reader.messages()) == []
