"""A pipeline split across "hosts" with no change to its nodes: the example camera here, the example encoder in
another network namespace (over a veth pair, test_support/isolation.py), reading the camera's CPU twin."""

import json
import subprocess
import sys
import time

import pytest
from isolation import isolation_unavailable, other_host

pytestmark = pytest.mark.skipif(isolation_unavailable() is not None, reason=str(isolation_unavailable()))

LISTEN = """
import json, sys, time, rclpy
from std_msgs.msg import String
rclpy.init(); node = rclpy.create_node("split_pipeline_listener"); last = {}
node.create_subscription(String, "pipeline_stats", lambda m: last.update(json.loads(m.data)) if "encoder" in m.data
                         else None, 10)
deadline = time.monotonic() + 120
while time.monotonic() < deadline and last.get("checked", 0) < 20:
    rclpy.spin_once(node, timeout_sec=0.1)
print(json.dumps(last), flush=True)
"""


def test_the_example_encoder_in_another_namespace_checks_the_cameras_frames_through_the_twin():
    procs = []
    with other_host() as (here, there):
        try:
            listener = subprocess.Popen(here.command(sys.executable, "-c", LISTEN), env=here.env, text=True,
                                        stdout=subprocess.PIPE)
            procs.append(listener)
            procs.append(subprocess.Popen(
                there.command(sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.encoder", "--ros-args",
                              "-p", "stats_period:=0.5"), env=there.env))
            time.sleep(1.0)
            procs.append(subprocess.Popen(
                here.command(sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--ros-args",
                             "-p", "width:=320", "-p", "height:=240", "-p", "fps:=10",
                             "-p", "wait_for_subscribers:=1"), env=here.env))
            report = json.loads(listener.communicate(timeout=150)[0].strip().splitlines()[-1])
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    assert report["checked"] >= 20 and report["bad"] == 0, report
    assert report["paths"]["fallback"] >= 20 and report["paths"]["zero_copy"] == 0, report
