"""The test side of the bag tests: run bag_record / bag_play and the peers as real processes, read their tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bag_peer import CLOUD_TOPIC, IMAGE_TOPIC, NOTE_TOPIC
from rosbags.typesys import Stores, get_typestore

TYPES = get_typestore(Stores.ROS2_KILTED)
PEER = str(Path(__file__).with_name("bag_peer.py"))


def tool(name: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", f"ros2_cuda_ipc_tools.bag.{name}", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def peer(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "test_support"),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, PEER, *args], stdout=subprocess.PIPE, text=True, env=env)


def counts_of(table: str) -> dict[str, dict[str, int]]:
    """The final table of bag_record: topic -> written, dropped, failed."""
    rows = {}
    for line in table.splitlines():
        words = line.split()
        if words and words[0] in (IMAGE_TOPIC, CLOUD_TOPIC, NOTE_TOPIC):
            rows[words[0]] = {"written": int(words[2]), "dropped": int(words[3]), "failed": int(words[4])}
    return rows
