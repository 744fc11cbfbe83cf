"""bag_play at its edges, as a newcomer meets them: a folder that is not a bag, nobody subscribed, an offset past the
end.  Each is one line that says what is so; bag_play runs as a real process."""

from __future__ import annotations

import re
import resource
import signal
import time
from pathlib import Path

from bag_tools import TYPES, tool
from peers import own_lines
from rosbags.rosbag2 import StoragePlugin, Writer
from test_bag_hostile import BASE, FRAMES, GOOD, image_cdr, play, played, write_bag


def test_an_empty_folder_is_not_a_bag_and_a_missing_one_no_such_bag(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, lines = play(empty)
    assert code == 2 and lines == [f"bag_play: {empty}: not a bag (no metadata.yaml, no .mcap or .db3 file)"], lines
    code, _, lines = play(tmp_path / "missing")
    assert code == 2 and lines == [f"bag_play: {tmp_path / 'missing'}: no such bag"], lines


def test_a_folder_of_storage_files_without_metadata_names_them(tmp_path) -> None:
    bag = tmp_path / "bag"
    write_bag(bag)
    (bag / "metadata.yaml").unlink()
    code, _, lines = play(bag)
    assert code == 2 and lines == [f"bag_play: {bag}: not a bag (no metadata.yaml); play one of its files: "
                                   "bag.mcap"], lines
    code, summary, _ = play(bag / "bag.mcap")
    assert code == 0 and played(summary) == FRAMES


def test_a_start_offset_past_the_end_is_one_line_and_exit_code_2(tmp_path) -> None:
    bag = tmp_path / "short"
    write_bag(bag)  # 0.2 s
    code, _, lines = play(bag, "--start-offset", "100")
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("bag_play: --start-offset 100 s is past the bag's last message"), lines
    code, summary, _ = play(bag, "--start-offset", "0.15")
    assert code == 0 and played(summary) == 1, summary


def test_no_subscriber_is_said_within_two_seconds_of_a_long_wait(tmp_path) -> None:
    bag = tmp_path / "alone"
    write_bag(bag)
    player = tool("play", str(bag), "--memory", "host", "--quiet", "--linger", "0", "--wait-for-matched", "60")
    try:
        assert player.stderr is not None
        deadline = time.monotonic() + 40
        line = ""
        while time.monotonic() < deadline and "no subscriber yet" not in line:
            line = player.stderr.readline()
            assert line, "bag_play ended before saying anything"
        said = re.match(rf"bag_play: no subscriber yet on {GOOD}: waiting up to ([0-9.]+) s more", line)
        assert said, line
        assert float(said.group(1)) >= 57.0, line  # said within 3 s of a 60 s wait, not at its end
        player.send_signal(signal.SIGINT)
        out, err = player.communicate(timeout=30)
    finally:
        player.kill()
    assert player.returncode == 0 and "played 0 messages" in out and "(stopped)" in out, (out, err)


def test_a_wait_that_ends_without_a_subscriber_says_the_replay_has_none(tmp_path) -> None:
    bag = tmp_path / "alone"
    write_bag(bag)
    code, summary, lines = play(bag, "--wait-for-matched", "2")
    assert code == 0 and played(summary) == FRAMES, (summary, lines)
    assert [line.split(":")[1].strip() for line in lines] == ["no subscriber yet on /hostile/image",
                                                                "playing with no subscriber on /hostile/image"], lines


def _many_topics(bag: Path, topics: int) -> None:
    """``topics`` small Image topics, 2 frames each."""
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = [writer.add_connection(f"/cam/c{i}", "sensor_msgs/msg/Image", typestore=TYPES)
                       for i in range(topics)]
        for k in range(2):
            for i, connection in enumerate(connections):
                writer.write(connection, BASE + k * 100_000_000 + i, image_cdr(k))


def _open_files(limit: int):
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    return lower


def test_a_bag_of_many_image_topics_under_ulimit_1024_plays_every_message(tmp_path) -> None:
    """Each pool costs 9 descriptors and a thread: 300 topics passed 1024 open files (OSError traceback before).
    The topics past the budget are published as plain sensor_msgs, said in one line."""
    bag = tmp_path / "many"
    _many_topics(bag, 300)
    player = tool("play", str(bag), "--memory", "host", "--linger", "0", "--quiet", "--wait-for-matched", "0",
                  preexec_fn=_open_files(1024))
    out, err = player.communicate(timeout=180)
    assert player.returncode == 0 and "Traceback" not in err, err
    assert "played 600 messages, dropped 0, bad 0" in out, out
    lines = [line for line in own_lines(err) if line.startswith("bag_play: ")]
    assert len(lines) == 1, lines
    plain = re.match(r"bag_play: (\d+) image or cloud topics are published as plain sensor_msgs, not through pools: "
                     r"their pools would pass this process's open-file limit \(1024, ulimit -n; \d+ a pool\)", lines[0])
    assert plain and 100 <= int(plain.group(1)) <= 260, lines[0]  # 40 or more through pools, within 1024 files
