"""bag_play at its edges, as a newcomer meets them: a folder that is not a bag, nobody subscribed, an offset past the
end.  Each is one line that says what is so; bag_play runs as a real process."""

from __future__ import annotations

import re
import signal
import time

from bag_tools import tool
from test_bag_hostile import FRAMES, GOOD, play, played, write_bag


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
