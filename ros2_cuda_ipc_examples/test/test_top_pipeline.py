"""cuda_ipc_top against a running pipeline: every pool and reader of the fanout pipeline shows, joined per topic,
from /diagnostics; the live view ends on Ctrl-C with 0; a node with diagnostics:=false is not there."""

import json
import signal
import subprocess
import sys
import time

import pytest

TOP = [sys.executable, "-m", "ros2_cuda_ipc_tools.top"]


def snapshot(wait: float = 2.5) -> dict:
    out = subprocess.run([*TOP, "--once", "--json", "--wait", str(wait)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.timeout(240)
def test_top_shows_the_fanout_pipeline_pools_and_readers(tmp_path):
    pipeline = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.runner", "fanout",
                                 "--memory", "host", "--size", "480p", "--fps", "15", "--seconds", "120",
                                 "--namespace", "/toptest", "--out", str(tmp_path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        topics: dict = {}
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and pipeline.poll() is None:
            topics = {row["topic"]: row for row in snapshot()["topics"]}
            image, tensor = topics.get("/toptest/image"), topics.get("/toptest/preprocessed")
            # The preprocess node makes its tensor pool at its first frame and reports it within a second; until
            # then the inference reader's status alone makes the tensor's row, publisher "?" (CI once broke here).
            if (image and tensor and len(image["readers"]) >= 3 and tensor["readers"] and image["rate_hz"]
                    and tensor["publisher"] != "?"):
                break
        assert pipeline.poll() is None, pipeline.communicate()
        image, tensor = topics["/toptest/image"], topics["/toptest/preprocessed"]
        assert image["publisher"] == "/toptest/camera" and image["memory"] == "host"
        assert {reader["node"] for reader in image["readers"]} >= {"/toptest/preprocess", "/toptest/encoder",
                                                                    "/toptest/preview"}
        assert image["blocks_in_use"] + image["blocks_held_by_readers"] + image["blocks_free"] <= 4
        assert tensor["publisher"] == "/toptest/preprocess"
        assert [reader["node"] for reader in tensor["readers"]] == ["/toptest/inference"]
        assert all(reader["pid"] != image["pid"] for reader in image["readers"])  # separate processes

        live = subprocess.Popen([*TOP], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert live.stdout is not None
        first = live.stdout.readline()  # the table's header: top is drawing
        live.send_signal(signal.SIGINT)
        _, err = live.communicate(timeout=30)
        assert live.returncode == 0 and "Traceback" not in err, err
        assert first.startswith("topic") or first.startswith("no ros2_cuda_ipc"), first
    finally:
        pipeline.send_signal(signal.SIGINT)
        pipeline.communicate(timeout=60)


@pytest.mark.timeout(120)
def test_a_node_with_diagnostics_off_is_not_reported():
    camera = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--ros-args", "-p",
                               "memory:=host", "-p", "width:=320", "-p", "height:=240", "-p", "diagnostics:=false",
                               "-r", "__ns:=/quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    loud = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--ros-args", "-p",
                             "memory:=host", "-p", "width:=320", "-p", "height:=240", "-r", "__ns:=/loud"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        topics: set = set()
        deadline = time.monotonic() + 90
        while "/loud/image" not in topics and time.monotonic() < deadline:
            topics = {row["topic"] for row in snapshot()["topics"]}
        assert "/loud/image" in topics and "/quiet/image" not in topics, topics
    finally:
        for process in (camera, loud):
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=30)
