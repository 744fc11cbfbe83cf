"""A GpuImage crosses real DDS between two OS processes, field for field."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

PEER = Path(__file__).with_name("gpu_image_peer.py")


def load_peer():
    spec = importlib.util.spec_from_file_location("gpu_image_peer", PEER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_image_between_processes():
    topic = "gpu_image_dds_test"
    sender = subprocess.Popen([sys.executable, str(PEER), "send", topic])
    try:
        out = subprocess.run([sys.executable, str(PEER), "receive", topic], capture_output=True, text=True, timeout=60)
    finally:
        sender.kill()
        sender.wait()
    assert out.returncode == 0, out.stderr
    received = json.loads(out.stdout.strip().splitlines()[-1])
    peer = load_peer()
    assert received == peer.as_dict(peer.sample())
    assert received["publisher_pid"] == 1000 and received["event_handle"] == "ab" * 64
