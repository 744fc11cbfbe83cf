"""The README's demo runs end to end: the fanout pipeline, then the same hop through ros2_cuda_ipc and sensor_msgs;
an interrupted demo says so, not OK, and still ends with exit code 0."""

import json
import signal
import subprocess
import sys
import time

DEMO = [sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.demo"]


def test_demo_runs_the_pipeline_and_the_comparison(tmp_path):
    args = ["--frames", "12", "--size", "160x120", "--fps", "8", "--hop-seconds", "1", "--memory", "auto",
            "--out", str(tmp_path), "--namespace", "/demo_test"]
    out = subprocess.run([*DEMO, *args], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "demo: frames live in" in out.stdout and "demo: OK" in out.stdout
    assert "sensor_msgs/Image (copies)" in out.stdout
    assert f"demo: preview.png: {tmp_path / 'preview.png'}" in out.stdout
    summary = json.loads((tmp_path / "pipeline-summary.json").read_text())
    assert summary["frames_published"] == 12 and summary["ok"]
    assert summary["hop"]["sensor_msgs"]["frames_checked"] > 0 and summary["hop"]["ros2_cuda_ipc"]["frames_checked"] > 0


def test_ctrl_c_in_the_first_stage_says_interrupted_not_ok_and_exits_0(tmp_path):
    """Before: 'demo: interrupted: the comparison stages are skipped', then 'demo: OK'."""
    demo = subprocess.Popen([*DEMO, "--seconds", "120", "--size", "160x120", "--fps", "8", "--memory", "host",
                             "--out", str(tmp_path), "--namespace", "/demo_interrupted"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (tmp_path / "preview.png").exists():  # frames flow
            assert demo.poll() is None, demo.communicate()
            time.sleep(0.2)
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=90)
    finally:
        demo.kill()
    assert demo.returncode == 0, out + err
    assert "demo: OK" not in out and "FAILED" not in out and "Traceback" not in err, out + err
    last = out.strip().splitlines()[-1]
    assert last.startswith("demo: INTERRUPTED in stage 1/3: not a complete run"), out
    assert "stages 2/3" not in out  # the comparison did not start
    assert json.loads((tmp_path / "pipeline-summary.json").read_text())["interrupted_in_stage"] == 1
