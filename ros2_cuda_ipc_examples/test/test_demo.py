"""The README's demo runs end to end: the fanout pipeline, then the same hop through ros2_cuda_ipc and sensor_msgs."""

import json
import subprocess
import sys


def test_demo_runs_the_pipeline_and_the_comparison(tmp_path):
    args = ["--frames", "12", "--size", "160x120", "--fps", "8", "--hop-seconds", "1", "--memory", "auto",
            "--out", str(tmp_path), "--namespace", "/demo_test"]
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.demo", *args],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "demo: frames live in" in out.stdout and "demo: OK" in out.stdout
    assert "sensor_msgs/Image (copies)" in out.stdout
    assert f"demo: preview.png: {tmp_path / 'preview.png'}" in out.stdout
    summary = json.loads((tmp_path / "pipeline-summary.json").read_text())
    assert summary["frames_published"] == 12 and summary["ok"]
    assert summary["hop"]["sensor_msgs"]["frames_checked"] > 0 and summary["hop"]["ros2_cuda_ipc"]["frames_checked"] > 0
