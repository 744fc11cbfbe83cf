"""bag_play against MCAP files that lie about their chunks: each lie is one line, and the player's memory stays
bounded by ``--max-frame-bytes`` and what a chunk states, never by what it inflates to.

Before the bound (rosbags decompressing chunks itself), measured on the 2-core machine: a 66 KiB bomb peaked at
6.2 GiB RSS and 44 s, a chunk stating 4 KiB that holds 1 GiB at 2.1 GiB, 20 KiB of empty records took 40 s and
62 KiB of empty messages 44 s, and 100 honest 8 MiB frames whose chunk indexes all state one start time 2.5 GiB
(208 MiB with honest indexes).  bag_play runs as a real process; a wrapper reports its peak RSS.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import mcap_bombs
import numpy as np
import pytest
from bag_tools import TYPES
from peers import own_lines
from rosbags.rosbag2 import StoragePlugin, Writer
from test_bag_hostile import BASE, FRAMES, GOOD, image_cdr

MiB = 1 << 20
_PEAK = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
         "print('peak-rss-kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
         "sys.exit(code)")


def play_measured(bag: Path, *args: str) -> tuple[int, str, list[str], int]:
    """bag_play of ``bag`` into host pools: exit code, stdout, its own stderr lines, and its peak RSS in bytes."""
    command = [sys.executable, "-c", _PEAK, sys.executable, "-m", "ros2_cuda_ipc_tools.bag.play", str(bag),
               "--memory", "host", "--linger", "0", "--quiet", "--wait-for-matched", "0", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert "Traceback" not in done.stderr, done.stderr
    peak = re.search(r"peak-rss-kib (\d+)", done.stderr)
    assert peak, done.stderr
    lines = [line for line in own_lines(done.stderr) if not line.startswith("peak-rss-kib")]
    return done.returncode, done.stdout.strip(), lines, int(peak.group(1)) * 1024


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> int:
    """The peak RSS of bag_play playing one small honest frame: what a process with rclpy costs here."""
    bag = mcap_bombs.one_start_time(tmp_path_factory.mktemp("baseline") / "one.mcap", frames=1, frame_bytes=MiB,
                                    honest=True)
    code, summary, lines, peak = play_measured(bag)
    assert code == 0 and "played 1 messages" in summary, (summary, lines)
    return peak


def _the_lie(lines: list[str], bag: Path, said: str) -> None:
    """The topic is skipped in one line saying the lie, and the replay ends with the one line of nothing to play."""
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"bag_play: {mcap_bombs.TOPIC} (sensor_msgs/msg/Image) is skipped") and said in lines[0]
    assert lines[1] == f"bag_play: {bag}: no topic of the bag can be played"


def test_a_bomb_is_refused_at_its_stated_size_without_inflating_it(tmp_path, baseline) -> None:
    bag = mcap_bombs.bomb(tmp_path / "bomb.mcap", inflated=2 << 30)
    assert bag.stat().st_size < 100 * 1024
    code, _, lines, peak = play_measured(bag)
    assert code == 2
    _the_lie(lines, bag, "states 2147")
    assert "more than 276824064 (--max-frame-bytes" in lines[0]
    assert peak < baseline + 32 * MiB, (peak, baseline)  # 6.2 GiB before


def test_a_bomb_under_a_lower_max_frame_bytes_is_refused_by_that_bound(tmp_path, baseline) -> None:
    bag = mcap_bombs.bomb(tmp_path / "bomb.mcap", inflated=64 * MiB)
    code, _, lines, peak = play_measured(bag, "--max-frame-bytes", str(MiB))
    assert code == 2
    _the_lie(lines, bag, f"more than {MiB + 8 * MiB} (--max-frame-bytes")
    assert peak < baseline + 32 * MiB, (peak, baseline)


def test_a_chunk_that_holds_more_than_it_states_is_inflated_one_byte_past_it(tmp_path, baseline) -> None:
    bag = mcap_bombs.lying_size(tmp_path / "lying.mcap", inflated=1 << 30, stated=4096)
    code, _, lines, peak = play_measured(bag)
    assert code == 2
    _the_lie(lines, bag, "a zstd chunk states 4096 uncompressed bytes and holds more")
    assert peak < baseline + 32 * MiB, (peak, baseline)  # 2.1 GiB before


def test_a_chunk_that_holds_less_than_it_states_is_one_line(tmp_path) -> None:
    bag = mcap_bombs.lying_size(tmp_path / "short.mcap", inflated=MiB, stated=2 * MiB)
    code, _, lines, _ = play_measured(bag)
    assert code == 2
    _the_lie(lines, bag, f"states {2 * MiB} uncompressed bytes and holds ")
    assert re.search(r"and holds \d+\)$", lines[0]), lines[0]  # fewer, and how many


@pytest.mark.parametrize("flood", ["records", "messages"])
def test_a_flood_of_empty_records_is_refused_by_the_record_budget(tmp_path, flood) -> None:
    bag = tmp_path / f"{flood}.mcap"
    if flood == "records":
        mcap_bombs.empty_records(bag, records=4_000_000)
    else:
        mcap_bombs.empty_messages(bag, messages=1_000_000)
    assert bag.stat().st_size < 64 * 1024
    code, _, lines, _ = play_measured(bag)
    assert code == 2
    _the_lie(lines, bag, "records (a flood of empty records?)")


def test_chunk_indexes_all_stating_one_start_time_hold_a_bounded_number_of_chunks(tmp_path, baseline) -> None:
    lying = mcap_bombs.one_start_time(tmp_path / "lying.mcap", frames=100, frame_bytes=8 * MiB)
    code, summary, lines, peak = play_measured(lying, "--rate", "100")
    assert code == 0 and "played 100 messages, dropped 0, bad 0" in summary, (summary, lines)
    assert len(lines) == 1 and "chunks stating overlapping times would hold more than 64 MiB" in lines[0], lines
    # 64 MiB of chunks open, one 8 MiB frame beside them and the pool's 8 blocks: 2.5 GiB before
    assert peak < baseline + 64 * MiB + 9 * 8 * MiB + 64 * MiB, (peak, baseline)


def test_a_cloud_of_overlapping_fields_is_refused_by_the_checked_layout_before_any_expansion(tmp_path,
                                                                                               baseline) -> None:
    """Issue 35: 60 overlapping fields of count 65,536 in an 8.7 KiB bag took bag_play 18.3 s and 478 MiB; bag_play
    checks a cloud through the pointcloud package's CloudLayout.validate (overlaps before names)."""
    Cloud, Header, Time, Field = (TYPES.types[t] for t in ("sensor_msgs/msg/PointCloud2", "std_msgs/msg/Header",
                                                           "builtin_interfaces/msg/Time", "sensor_msgs/msg/PointField"))
    fields = [Field(name=f"f{i}", offset=0, datatype=1, count=65536) for i in range(60)]
    bag = tmp_path / "fields"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connection = writer.add_connection("/lidar/points", "sensor_msgs/msg/PointCloud2", typestore=TYPES)
        for k in range(2):
            cloud = Cloud(header=Header(stamp=Time(sec=k, nanosec=0), frame_id="lidar"), height=1, width=1,
                          fields=fields, is_bigendian=False, point_step=65536, row_step=65536,
                          data=np.zeros(16, np.uint8), is_dense=True)
            writer.write(connection, 10**18 + k, TYPES.serialize_cdr(cloud, "sensor_msgs/msg/PointCloud2"))
    code, summary, lines, peak = play_measured(bag)
    assert code == 0 and "played 0 messages, dropped 0, bad 2" in summary, (summary, lines)
    assert all("field 'f0' [0, 65536) overlaps field 'f1' at byte 0" in line for line in lines), lines
    assert peak < baseline + 32 * MiB, (peak, baseline)


@pytest.mark.parametrize("mode", ["STORAGE", "MESSAGE"])
def test_an_honest_compressed_bag_plays_every_frame(tmp_path, mode) -> None:
    """rosbags' zstd chunks (STORAGE) and per-message zstd (MESSAGE) go through the bounded decompression whole."""
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

    bag = tmp_path / mode.lower()
    writer = Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode[mode], CompressionFormat.ZSTD)
    with writer:
        connection = writer.add_connection(GOOD, "sensor_msgs/msg/Image", typestore=TYPES)
        for i in range(FRAMES):
            writer.write(connection, BASE + i * 1000, image_cdr(i))
    code, summary, lines, _ = play_measured(bag)
    assert code == 0 and f"played {FRAMES} messages, dropped 0, bad 0" in summary, (summary, lines)
    assert lines == [], lines


def test_a_bag_compressed_per_file_is_refused_in_one_line(tmp_path) -> None:
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

    bag = tmp_path / "file"
    writer = Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode.FILE, CompressionFormat.ZSTD)
    with writer:
        connection = writer.add_connection(GOOD, "sensor_msgs/msg/Image", typestore=TYPES)
        writer.write(connection, BASE, image_cdr(0))
    code, _, lines, _ = play_measured(bag)
    assert code == 2 and len(lines) == 1 and "compressed per file (compression_mode: file)" in lines[0], lines
