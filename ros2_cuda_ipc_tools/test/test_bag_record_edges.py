"""bag_record at its edges, as a newcomer meets them: a topic name no topic can have, a misspelled topic while the
right one is published, the help of every option.  bag_record and the camera run as real processes."""

from __future__ import annotations

import re
import signal

import pytest
from bag_peer import IMAGE_TOPIC
from bag_tools import peer, tool
from peers import line_with, own_lines


@pytest.mark.parametrize("name", ["bad topic", "/a//b", "1abc", "/cam/imag e"])
def test_an_invalid_topic_name_is_one_line_exit_2_and_leaves_no_folder(tmp_path, name) -> None:
    bag = tmp_path / "bag"
    recorder = tool("record", "-o", str(bag), "/fine", name)
    out, err = recorder.communicate(timeout=60)
    assert recorder.returncode == 2, (out, err)
    assert own_lines(err) == [f"bag_record: {name!r} is not a valid topic name ({own_lines(err)[0].split('(', 1)[1]}"]
    assert not bag.exists()


def test_the_corrected_command_after_an_invalid_name_is_not_refused(tmp_path) -> None:
    bag = tmp_path / "bag"
    refused = tool("record", "-o", str(bag), "/cam/imag e")
    assert refused.wait(timeout=60) == 2 and not bag.exists()
    recorder = tool("record", "-o", str(bag), "/fine")
    line_with(recorder.stderr, "waiting for /fine")  # its first status line: running
    recorder.send_signal(signal.SIGTERM)
    out, err = recorder.communicate(timeout=60)
    assert recorder.returncode == 0 and "0 messages" in out, err
    assert (bag / "metadata.yaml").exists()


def test_a_misspelled_topic_is_hinted_with_the_published_one_close_to_it(tmp_path) -> None:
    camera = peer("camera", "1", "8", "4", "10")  # its publishers wait (up to 60 s) for subscribers
    recorder = tool("record", "-o", str(tmp_path / "bag"), IMAGE_TOPIC[:-1], "--quiet")
    try:
        line = line_with(recorder.stderr, "no publisher after")
        assert f"{IMAGE_TOPIC[:-1]}: no publisher after 3 s; published close by: {IMAGE_TOPIC} " \
               "(ros2_cuda_ipc_msgs/msg/GpuImage)" in line and line.rstrip().endswith("; still waiting for it"), line
        recorder.send_signal(signal.SIGINT)
        out, err = recorder.communicate(timeout=60)
    finally:
        recorder.kill()
        camera.kill()
        camera.wait()
    assert recorder.returncode == 0 and "0 messages" in out, err


def _options_without_help(help_text: str) -> list[str]:
    """The options of an argparse help whose entry has no text (an option line with nothing after it and no
    indented line following)."""
    lines = help_text.split("options:", 1)[1].splitlines()
    bare = []
    for i, line in enumerate(lines):
        entry = re.match(r"^  (-\S.*?)(?:\s{2,}(\S.*))?$", line)
        if entry and not entry.group(2):
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if not re.match(r"^\s{10,}\S", following):
                bare.append(entry.group(1))
    return bare


@pytest.mark.parametrize("module", ["record", "play", "benchmark"])
def test_every_option_has_help_and_there_is_a_version(module) -> None:
    helped = tool(module, "--help")
    out, _ = helped.communicate(timeout=60)
    assert helped.returncode == 0 and _options_without_help(out) == [], out
    if module == "record":
        assert "--jpeg-quality 1..100" in out and "JPEG quality of --compressed images" in out, out
    if module == "benchmark":
        assert "``" not in out and "how fast bag_record writes a raw camera" in out, out
    versioned = tool(module, "--version")
    out, _ = versioned.communicate(timeout=60)
    assert versioned.returncode == 0 and re.search(r" \d+\.\d+\S*\s*$", out), out


def test_the_final_table_says_why_each_frame_was_dropped() -> None:
    """A GPU suite's compressed recording wrote 29 of 30 with 'dropped 1', and nothing said whether the frame had
    gone stale, found no free ring buffer, or met a full queue (session 16)."""
    from ros2_cuda_ipc_tools.bag.topic_counts import RecordStatus, TopicCounts

    status = RecordStatus()
    image = status.topics["/cam/image"] = TopicCounts("sensor_msgs/msg/Image")
    status.topics["/notes"] = TopicCounts("std_msgs/msg/String")
    for cause in ("stale", "no_buffer", "stale"):
        image.drop(cause)
    image.add("written", 27)
    lines = status.table().splitlines()
    assert lines[1].split()[:5] == ["/cam/image", "sensor_msgs/msg/Image", "27", "3", "0"]
    assert lines[-1] == ("dropped on /cam/image: 1 no free ring buffer (the writer still held them all), "
                         "2 stale (its block moved on before the recorder read it)")
    assert not any(line.startswith("dropped on /notes") for line in lines)  # nothing dropped: no line
