"""bag_play against hostile bags: each lie a bag can tell is one line saying what is skipped, and the rest plays.

Every bag here is generated (rosbags' writer, a few small frames); one is a ``.db3`` with one byte of one
stamp flipped.  bag_play runs as a real process with host pools and no subscriber: its closing summary
counts what it published.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from bag_tools import TYPES, tool
from peers import own_lines
from rosbags.rosbag2 import StoragePlugin, Writer
from ruamel.yaml import YAML

GOOD = "/hostile/image"
FRAMES = 3
BASE = 10**18


def image_cdr(i: int, width: int = 8, height: int = 4) -> bytes:
    Image, Header = TYPES.types["sensor_msgs/msg/Image"], TYPES.types["std_msgs/msg/Header"]
    Time = TYPES.types["builtin_interfaces/msg/Time"]
    image = Image(header=Header(stamp=Time(sec=1000 + i, nanosec=i), frame_id="camera"), height=height, width=width,
                  encoding="mono8", is_bigendian=0, step=width, data=np.full(width * height, i, np.uint8))
    return bytes(TYPES.serialize_cdr(image, "sensor_msgs/msg/Image"))


def write_bag(path: Path, stamps: list[int] | None = None, *, extra=(), storage=StoragePlugin.MCAP,
              image_type: str = "sensor_msgs/msg/Image") -> None:
    """``FRAMES`` small images on GOOD at ``stamps`` (default 10 Hz), and ``extra`` topics: (topic, msgtype, msgdef,
    rihs01) with one message of a few bytes each."""
    stamps = stamps if stamps is not None else [BASE + i * 100_000_000 for i in range(FRAMES)]
    with Writer(path, version=9, storage_plugin=storage) as writer:
        good = writer.add_connection(GOOD, image_type, typestore=TYPES)
        others = [writer.add_connection(topic, msgtype, msgdef=msgdef, rihs01=rihs01)
                  for topic, msgtype, msgdef, rihs01 in extra]
        for i, stamp in enumerate(stamps):
            writer.write(good, stamp, image_cdr(i))
        for connection in others:
            writer.write(connection, BASE + 1, b"\x00\x01\x00\x00\x05\x00\x00\x00hello\x00")


def play(bag: Path, *args: str, timeout: float = 60) -> tuple[int, str, list[str]]:
    """bag_play of ``bag`` into host pools: its exit code, its summary line, its own stderr lines."""
    player = tool("play", str(bag), "--memory", "host", "--linger", "0", "--quiet", "--wait-for-matched", "0", *args)
    out, err = player.communicate(timeout=timeout)
    assert "Traceback" not in err, err
    return player.returncode, out.strip(), own_lines(err)


def played(summary: str) -> int:
    found = re.search(r"played (\d+) messages", summary)
    assert found, summary
    return int(found.group(1))


def hash_of(msgtype: str) -> str:
    return TYPES.hash_rihs01(msgtype)


ZOO = {  # topic: (type the bag names, definition, hash, what bag_play must say of it)
    "/zen": ("this/msg/Thing", "string data", "RIHS01_" + "0" * 64, "not an installed ROS interface"),
    "/path": ("os/path/join", "string data", "RIHS01_" + "0" * 64, "not a message type name"),
    "/node": ("rclpy/node/Node", "string data", "RIHS01_" + "0" * 64, "not a message type name"),
    "/nope": ("std_msgs/msg/Nope", "string data", "RIHS01_" + "0" * 64, "std_msgs has no msg/Nope"),
    "/rt/bad topic!!": ("std_msgs/msg/String", "string data", hash_of("std_msgs/msg/String"),
                        "is not a valid topic name"),
    "/redefined": ("std_msgs/msg/String", "int32 data", "RIHS01_" + "1" * 64, "is not this system's std_msgs/msg/String"),
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> tuple[int, str, list[str]]:
    """One bag holding every bad topic beside one good image topic, played once."""
    bag = tmp_path_factory.mktemp("hostile") / "zoo"
    write_bag(bag, extra=[(topic, t, d, h) for topic, (t, d, h, _) in ZOO.items()])
    return play(bag)


@pytest.mark.parametrize("topic", list(ZOO))
def test_a_bad_topic_is_one_line_saying_it_is_skipped(zoo, topic) -> None:
    code, _, lines = zoo
    said = [line for line in lines if line.startswith(f"bag_play: {topic} (")]
    assert len(said) == 1, lines
    assert "is skipped" in said[0] and ZOO[topic][3] in said[0], said[0]
    assert code == 0


def test_the_rest_of_a_bag_with_bad_topics_plays_and_no_module_a_bag_names_is_imported(zoo) -> None:
    code, summary, lines = zoo
    assert code == 0 and played(summary) == FRAMES, (summary, lines)
    assert not any("Beautiful is better than ugly" in line for line in lines)  # `import this` never ran
    assert len(lines) == len(ZOO), lines  # nothing but the one line a bad topic


@pytest.mark.parametrize("case", ["outlier 2**63-1", "backwards 0"])
def test_an_outlier_stamp_is_a_gap_skipped_not_a_hang(tmp_path, case) -> None:
    bag = tmp_path / "stamps"
    stamps = [BASE + i * 100_000_000 for i in range(FRAMES)]
    if case == "outlier 2**63-1":
        stamps.append(2**63 - 1)
    else:
        stamps.insert(0, 0)
    write_bag(bag, stamps)
    code, summary, lines = play(bag, "--max-gap", "2", timeout=60)
    assert code == 0 and played(summary) == FRAMES + 1 and "1 gap skipped" in summary, (summary, lines)
    gaps = [line for line in lines if "without a message" in line]
    assert len(gaps) == 1 and "skipped" in gaps[0] and "--max-gap 2" in gaps[0], lines


def _write_more_frames(path: Path, frames: int) -> None:
    with Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3) as writer:
        good = writer.add_connection(GOOD, "sensor_msgs/msg/Image", typestore=TYPES)
        for i in range(frames):
            writer.write(good, BASE + i * 100_000_000, image_cdr(i))


def test_one_flipped_byte_in_a_db3_stamp_is_a_gap_skipped(tmp_path) -> None:
    bag = tmp_path / "flipped"
    _write_more_frames(bag, 5)
    db = sqlite3.connect(bag / "flipped.db3")
    (row, stamp), = db.execute("SELECT id, timestamp FROM messages ORDER BY timestamp LIMIT 1 OFFSET 2").fetchall()
    db.execute("UPDATE messages SET timestamp = ? WHERE id = ?", (stamp ^ (0x40 << 48), row))  # byte 6, bit 6
    db.commit()
    db.close()
    code, summary, lines = play(bag, timeout=60)
    assert code == 0 and played(summary) == 5 and "1 gap skipped" in summary, (summary, lines)
    assert any("without a message" in line for line in lines), lines


def _edit_metadata(bag: Path, edit) -> None:
    yaml = YAML(typ="safe")
    metadata = yaml.load((bag / "metadata.yaml").read_text())
    edit(metadata["rosbag2_bagfile_information"])
    with (bag / "metadata.yaml").open("w") as out:
        yaml.dump(metadata, out)


def test_metadata_that_lies_about_a_type_is_said_and_the_files_are_played(tmp_path) -> None:
    bag = tmp_path / "lying"
    write_bag(bag)

    def lie(info) -> None:
        info["topics_with_message_count"][0]["topic_metadata"]["type"] = "sensor_msgs/msg/PointCloud2"
    _edit_metadata(bag, lie)
    code, summary, lines = play(bag)
    assert code == 0 and played(summary) == FRAMES, (summary, lines)
    assert lines == [f"bag_play: metadata.yaml says {GOOD} is sensor_msgs/msg/PointCloud2, the files say "
                     "sensor_msgs/msg/Image: played as the files say"]


def test_metadata_that_miscounts_is_said(tmp_path) -> None:
    bag = tmp_path / "miscounted"
    write_bag(bag)

    def lie(info) -> None:
        info["topics_with_message_count"][0]["message_count"] = 203
    _edit_metadata(bag, lie)
    code, summary, lines = play(bag)
    assert code == 0 and played(summary) == FRAMES
    assert lines == [f"bag_play: metadata.yaml counts 203 messages of {GOOD}, the files {FRAMES}: the files' are "
                     "played"]


def test_max_frame_bytes_refuses_a_larger_frame_in_one_line(tmp_path) -> None:
    bag = tmp_path / "large"
    write_bag(bag)  # 32-byte frames in messages of about 80 bytes
    code, summary, lines = play(bag, "--max-frame-bytes", "40")
    assert code == 0 and played(summary) == 0 and f"bad {FRAMES}" in summary, (summary, lines)
    assert any("max_frame_bytes (40)" in line for line in lines), lines
    code, summary, _ = play(bag, "--max-frame-bytes", "1000")
    assert played(summary) == FRAMES


@pytest.mark.parametrize("text", ["rosbag2_bagfile_information: [\n  {a: 1\n", "just: [a, b]: c\n\t- x"])
def test_broken_yaml_is_one_line_and_exit_code_2(tmp_path, text) -> None:
    bag = tmp_path / "yaml"
    write_bag(bag)
    (bag / "metadata.yaml").write_text(text)
    code, _, lines = play(bag)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("bag_play: "), lines
