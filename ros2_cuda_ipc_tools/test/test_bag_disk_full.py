"""bag_record on a disk that fills mid-recording: the recorder finalises what reached the disk whole (MCAP: whole
chunks, SQLite3: committed transactions), writes ``metadata.yaml`` whose counts are the files', says what was lost
and exits 1; the bag stays readable by rosbags and playable by bag_play.

The disk is a small tmpfs this test mounts and unmounts (root only; skipped otherwise).  Before: MCAP reported 27
messages where its file held 18 and left no ``metadata.yaml`` ("no such bag", "File end magic is invalid");
SQLite3 left an empty ``.db3``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from bag_peer import CLOUD_TOPIC, IMAGE_TOPIC, NOTE_TOPIC
from bag_tools import counts_of, peer, tool
from rosbags.rosbag2 import Reader
from ruamel.yaml import YAML
from test_bag_hostile import play, played


@contextmanager
def small_disk(mib: int) -> Iterator[Path]:
    """A tmpfs of ``mib`` MiB, mounted for the test and unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="bag-disk-full-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(where)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def _record(bag: Path, frames: int, *extra: str, stop: bool = False) -> tuple[int, str, str]:
    """The camera peer's ``frames`` (0.9 MB images and 0.1 MB clouds, 20 a second) recorded into ``bag``: the
    recorder's exit code and output, once it stopped by itself (writing stopped) or was sent SIGINT (``stop``)."""
    recorder = tool("record", "-o", str(bag), IMAGE_TOPIC, CLOUD_TOPIC, NOTE_TOPIC, "--quiet", *extra)
    camera = peer("camera", str(frames), "640", "480", "20")
    try:
        assert json.loads(camera.stdout.readline()) == {"ready": True}
        camera.communicate(timeout=240)
        if stop:
            recorder.send_signal(signal.SIGINT)
        out, err = recorder.communicate(timeout=60)
    finally:
        camera.kill()
        recorder.kill()
        camera.wait()
    return recorder.returncode, out, err


@pytest.mark.parametrize(("storage", "mib", "frames"), [("mcap", 6, 40), ("sqlite3", 40, 80)])
def test_a_full_disk_leaves_a_closed_bag_whose_counts_are_its_files(storage, mib, frames) -> None:
    with small_disk(mib) as disk:
        _a_full_disk(disk / "bag", storage, frames)


def _a_full_disk(bag: Path, storage: str, frames: int) -> None:
    code, out, err = _record(bag, frames, "--storage", storage)  # SQLite3 commits once a second: a larger disk
    assert code == 1, (out, err)
    assert "Traceback" not in err, err
    stopped = [line for line in err.splitlines() if line.startswith("bag_record: writing stopped:")]
    assert len(stopped) == 1 and ("[Errno 28]" in stopped[0] or "full" in stopped[0]), err
    assert "lost" in stopped[0] and "the bag is closed with what reached the disk whole" in stopped[0], stopped
    counts = counts_of(out)
    written = sum(c["written"] for c in counts.values())
    assert counts[IMAGE_TOPIC]["written"] > 0, out
    metadata = YAML(typ="safe").load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert metadata["message_count"] == written, (metadata, out)
    assert {t["topic_metadata"]["name"]: t["message_count"] for t in metadata["topics_with_message_count"]} == \
        {topic: c["written"] for topic, c in counts.items()}
    with Reader(bag) as reader:
        assert reader.message_count == written
        assert sum(1 for _ in reader.messages()) == written
    code, summary, lines = play(bag, timeout=120)
    assert code == 0 and played(summary) == written, (summary, lines)


def test_a_disk_full_before_the_first_chunk_still_leaves_a_bag() -> None:
    with small_disk(1) as disk:
        code, out, err = _record(disk / "bag", 10)
        assert code == 1 and "Traceback" not in err, err
        with Reader(disk / "bag") as reader:
            assert reader.message_count == sum(c["written"] for c in counts_of(out).values())
