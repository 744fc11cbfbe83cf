"""The fanout pipeline end to end on host memory: every frame checked at every consumer, separate and composed."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ros2_cuda_ipc_examples.nodes.arrays import cuda_unavailable_reason as unavailable_reason
from ros2_cuda_ipc_examples.nodes.png import read_png
from ros2_cuda_ipc_examples.nodes.scene import Probe
from ros2_cuda_ipc_examples.pipelines import demo, runner
from ros2_cuda_ipc_examples.pipelines.arguments import add_run_arguments, options_from
from ros2_cuda_ipc_examples.pipelines.definitions import Pipeline, PipelineOptions, fanout, lidar
from ros2_cuda_ipc_examples.pipelines.runner import PipelineFailed, run_pipeline
from ros2_cuda_ipc_tools import PARENT_PID_VARIABLE, STACKS_SIGNAL, ComponentSpec, follow_runner

FRAMES = 20
CONSUMERS = ("preprocess", "inference", "encoder", "preview")


def small_options(tmp_path: Path, namespace: str) -> PipelineOptions:
    # Slow enough that a busy 2-core CI machine keeps up; 8 blocks absorb a stall of over a second.
    return PipelineOptions(width=160, height=120, fps=8.0, memory="host", frames=FRAMES, namespace=namespace,
                           out_dir=tmp_path, block_count=8)


def assert_every_frame_checked(summary: dict) -> None:
    assert summary["ok"], json.dumps(summary, indent=1)
    assert summary["frames_published"] == FRAMES
    for name in CONSUMERS:
        report = summary["nodes"][name]
        counts = (report["checked"], report["bad"], report["stale"], report["lost"])
        assert counts == (FRAMES, 0, 0, 0), f"{name}: checked, bad, stale, lost {counts}; first drops (s after " \
            f"its start, what, frames) {report['first_drops']}; {json.dumps(report)}"
        assert report["latency_ms_total"]["n"] == FRAMES
    assert set(summary["exit_codes"].values()) == {0}


def assert_tensors_between_preprocess_and_inference(summary: dict, dtype: str) -> None:
    assert summary["nodes"]["preprocess"]["output"] == f"GpuTensor 1x3x224x224 {dtype}"
    assert summary["nodes"]["inference"]["input"] == f"GpuTensor 1x3x224x224 {dtype}"
    assert summary["nodes"]["inference"]["output"] == "GpuTensor Nx10 float32"  # the logits, batch kept


def assert_preview_shows_the_picture(path: str) -> None:
    pixels = read_png(path)
    assert pixels.shape == (120, 160, 3)
    probe = Probe.for_image(120, 160)
    seq, matches = probe.check(pixels[probe.ys, probe.xs])
    assert matches and 0 <= seq < FRAMES


def test_fanout_as_separate_processes(tmp_path):
    options = small_options(tmp_path, "/fanout_separate")
    summary = run_pipeline(fanout(options), options, stream=None)
    assert summary["mode"] == "separate"
    assert_every_frame_checked(summary)
    pids = {summary["nodes"][name]["pid"] for name in ("camera", *CONSUMERS)}
    assert len(pids) == 5
    assert all(summary["nodes"][name]["same_process_reads"] == 0 for name in CONSUMERS)
    assert_tensors_between_preprocess_and_inference(summary, "float16")
    assert_preview_shows_the_picture(summary["preview_png"])


def test_fanout_composed_reads_through_the_same_process_path(tmp_path):
    options = small_options(tmp_path, "/fanout_composed")
    summary = run_pipeline(fanout(options), options, compose=True, stream=None)
    assert summary["mode"] == "composed"
    assert_every_frame_checked(summary)
    assert len({summary["nodes"][name]["pid"] for name in ("camera", *CONSUMERS)}) == 1
    for name in CONSUMERS:
        report = summary["nodes"][name]
        assert report["same_process_reads"] == report["reads"] == FRAMES, (name, report)
    assert_preview_shows_the_picture(summary["preview_png"])


def test_fanout_on_bfloat16_tensors_composed(tmp_path):
    """bfloat16 on host memory: numpy has none, so Preprocess writes its bits and InferenceLike reads them back."""
    options = dataclasses.replace(small_options(tmp_path, "/fanout_bfloat16"), tensor_dtype="bfloat16")
    summary = run_pipeline(fanout(options), options, compose=True, stream=None)
    assert_every_frame_checked(summary)
    assert_tensors_between_preprocess_and_inference(summary, "bfloat16")


def test_lidar_composed_checks_every_scan(tmp_path):
    options = PipelineOptions(width=256, height=16, fps=8.0, memory="host", frames=FRAMES, namespace="/lidar_composed",
                              out_dir=tmp_path, block_count=8)
    summary = run_pipeline(lidar(options), options, compose=True, stream=None)
    assert summary["ok"] and summary["source"] == "lidar" and summary["frames_published"] == FRAMES, summary
    for name in ("voxel", "preview"):
        report = summary["nodes"][name]
        assert (report["checked"], report["bad"], report["stale"], report["lost"]) == (FRAMES, 0, 0, 0), (name, report)
        assert report["same_process_reads"] == report["reads"] == FRAMES
    assert read_png(summary["preview_png"]).shape == (480, 480, 3)


def test_a_failing_node_is_reported_at_once(tmp_path):
    options = PipelineOptions(width=160, height=120, memory="host", namespace="/failing", out_dir=tmp_path)
    broken = Pipeline("broken", [ComponentSpec("ros2_cuda_ipc_examples::SyntheticCamera", "camera", "/failing",
                                               {"fps": -1.0, "memory": "host"})])
    started = time.monotonic()
    with pytest.raises(PipelineFailed) as failure:
        run_pipeline(broken, options, stream=None)
    assert time.monotonic() - started < 30
    message = str(failure.value)
    assert "camera" in message and "exited with code 2" in message and "fps must be a finite number > 0, not -1.0" in message


def _children_in(namespace: str) -> list[int]:
    """Pids of this process's children started with ``__ns:=namespace``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and f"__ns:={namespace}".encode() in command:
            pids.append(int(entry.name))
    return pids


def test_a_node_that_cannot_be_started_leaves_no_process_and_no_rclpy_behind(tmp_path):
    import rclpy

    options = PipelineOptions(width=160, height=120, memory="host", namespace="/unstartable", out_dir=tmp_path)
    camera = ComponentSpec("ros2_cuda_ipc_examples::SyntheticCamera", "camera", "/unstartable", {"memory": "host"})
    unstartable = ComponentSpec("ros2_cuda_ipc_examples::EncoderLike", "no/such/dir", "/unstartable")
    with pytest.raises(FileNotFoundError):  # its log file cannot be made, after the camera was started
        run_pipeline(Pipeline("unstartable", [camera, unstartable]), options, stream=None)
    assert _children_in("/unstartable") == []  # the camera was stopped and reaped
    assert not rclpy.ok()  # the next run in this process can initialise rclpy again


def test_ctrl_c_stops_the_pipeline_with_exit_code_0_and_writes_the_summary(tmp_path):
    runner = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.runner", "fanout", "--size", "160x120",
                               "--fps", "5", "--memory", "host", "--out", str(tmp_path), "--namespace", "/fanout_ctrl_c"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    summary_path = tmp_path / "pipeline-summary.json"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (tmp_path / "preview.png").exists():
            assert runner.poll() is None, runner.communicate()
            time.sleep(0.2)
        time.sleep(2.0)  # a report or two from every node
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=60)
    finally:
        runner.kill()
    assert runner.returncode == 0, err
    assert "Traceback" not in err + out
    summary = json.loads(summary_path.read_text())
    assert summary["interrupted"] and summary["frames_published"] > 0
    assert "preview" in out and "camera" in out  # the live table was shown
    assert all(summary["nodes"].values()), summary["nodes"]
    for report in summary["nodes"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(report["pid"], 0)  # every node's process is gone


def test_blocks_and_reuse_delay_reach_every_node_that_publishes_from_a_pool():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    options, _ = options_from(parser, parser.parse_args(["--memory", "host", "--blocks", "6", "--reuse-delay", "0"]))
    assert (options.block_count, options.reuse_delay) == (6, 0.0)
    for pipeline, owners in ((fanout(options), {"camera", "preprocess"}), (lidar(options), {"lidar", "voxel"})):
        pools = {spec.name: (spec.parameters["block_count"], spec.parameters["reuse_delay"])
                 for spec in pipeline.components if "block_count" in spec.parameters}
        assert pools == dict.fromkeys(owners, (6, 0.0))


def test_the_cuda_wait_reaches_every_node_process_and_a_bad_one_is_a_usage_error(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    options, _ = options_from(parser, parser.parse_args(["--memory", "host", "--cuda-wait", "blocking"]))
    assert options.cuda_wait == "blocking"
    assert options_from(parser, parser.parse_args(["--memory", "host"]))[0].cuda_wait == "auto"
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--cuda-wait", "sleepy"])
    assert exited.value.code == 2 and "invalid choice: 'sleepy'" in capsys.readouterr().err
    shows = "import os; print('wait', os.environ['ROS2_CUDA_IPC_CUDA_WAIT'])"
    child = runner._start("node", [sys.executable, "-c", shows], tmp_path, bytes(32), cuda_wait=options.cuda_wait)
    try:
        assert child.process.wait(timeout=60) == 0
    finally:
        child.process.kill()
        child.requests.close()
    assert "wait blocking" in (tmp_path / "node.log").read_text().splitlines()


def test_a_source_that_never_starts_fails_the_run_instead_of_stalling_it(tmp_path, monkeypatch):
    # Only the wait for the first frame is short: the camera's own start-up (imports, DDS) keeps the runner's
    # full bound, which a loaded 2-core machine needed more than 3 s of (the test failed so, now and then).
    monkeypatch.setattr(runner, "FIRST_FRAME_TIMEOUT", 3.0)
    options = PipelineOptions(width=160, height=120, memory="host", frames=3, namespace="/never_starts", out_dir=tmp_path)
    camera = ComponentSpec("ros2_cuda_ipc_examples::SyntheticCamera", "camera", "/never_starts",
                           {"memory": "host", "width": 160, "height": 120, "frames": 3, "wait_for_subscribers": 1})
    with pytest.raises(PipelineFailed) as failure:  # nobody subscribes: it waits for ever
        run_pipeline(Pipeline("never_starts", [camera]), options, stream=None)
    assert "camera sent no frame in the 3 s after every node reported" in str(failure.value)
    assert _children_in("/never_starts") == []


# Every process started while this is on PYTHONPATH keeps SIGINT blocked, in all its threads: a node that
# does not stop when the runner asks it to.
NOT_STOPPING = "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"


def test_a_node_that_does_not_stop_says_where_it_is_before_it_is_killed(tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(NOT_STOPPING)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    options = PipelineOptions(width=160, height=120, fps=8.0, memory="host", frames=3, namespace="/not_stopping",
                              out_dir=tmp_path / "out")
    camera = ComponentSpec("ros2_cuda_ipc_examples::SyntheticCamera", "camera", "/not_stopping",
                           {"memory": "host", "width": 160, "height": 120, "fps": 8.0, "frames": 3})
    with pytest.raises(PipelineFailed) as failure:
        run_pipeline(Pipeline("not_stopping", [camera]), options, stream=None)
    message = str(failure.value)
    assert "camera" in message and "was still running 15 s after SIGINT and was killed" in message, message
    assert "most recent call first" in message and "run_nodes" in message, message  # its stacks, from its log
    stacks = Path(message.rsplit("its threads below Python: ", 1)[1].strip())
    assert "threads of pid" in stacks.read_text()  # and where each thread waited below Python
    assert _children_in("/not_stopping") == []


def test_follow_runner_only_acts_in_a_runners_child(monkeypatch):
    monkeypatch.delenv(PARENT_PID_VARIABLE, raising=False)
    follow_runner()  # not started by a runner: the stacks signal keeps its default action
    assert signal.getsignal(STACKS_SIGNAL) == signal.SIG_DFL


@pytest.mark.parametrize(("args", "message"), [
    (["--frames", "0"], "argument --frames: must be positive, not 0"),
    (["--frames", "-1"], "argument --frames: must be positive, not -1"),
    (["--rate", "0"], "argument --fps/--rate: must be positive, not 0"),
    (["--size", "0"], "'0' is not one of 480p, 720p, 1080p, 4k or WIDTHxHEIGHT"),
    (["--size", "10x10"], "argument --size: 10x10 is below the smallest fanout frame, 96x64"),
    (["--seconds", "nan?"], "'nan?' is not a number"),
    (["--blocks", "1"], "a pool needs at least 2 blocks"),
    (["--reuse-delay", "-1"], "argument --reuse-delay: must be a finite number of seconds >= 0, not -1"),
    (["--reuse-delay", "inf"], "argument --reuse-delay: must be a finite number of seconds >= 0, not inf"),
    (["--hop-seconds", "0"], "argument --hop-seconds: must be positive"),
])
def test_demo_refuses_bad_arguments(capsys, args, message):
    with pytest.raises(SystemExit) as end:
        demo.main(args)
    assert end.value.code == 2 and message in capsys.readouterr().err


def test_a_bad_argument_ends_the_demo_at_once():
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.demo", "--frames", "-1"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "argument --frames: must be positive, not -1" in out.stderr
    assert "Traceback" not in out.stderr and time.monotonic() - started < 30


@pytest.mark.skipif(unavailable_reason(0) is None, reason="checks the message where there is no usable GPU")
def test_demo_on_cuda_without_a_gpu_says_why_at_once():
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.demo", "--memory", "cuda"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "memory='cuda' cannot be used: no usable CUDA driver" in out.stderr


def _gpu_skip_reason() -> str | None:
    reason = unavailable_reason(0)
    if reason is None and importlib.util.find_spec("torch") is None:
        reason = "torch is not installed"
    return None if reason is None else f"needs a CUDA GPU and torch: {reason}"


#: Frames a consumer's first second may lose (the nodes' own ``warmup_frames``).  A consumer's first frame carries
#: one-time work: the camera's pool imported, preprocess's output pool and publisher made, torch's kernels loaded on
#: first use.  Meanwhile the camera goes on at 30 Hz, never waiting (by design), and reuses its 4 blocks: frames
#: queued behind that first one go stale and are dropped, counted.  Alone that work takes about 0.1 s (0 to 3
#: frames: runs 12, 13, 22).  Beside eleven busy test files three rounds lost 19 frames (131 of 150 at preprocess or
#: inference; the bar of 135 counted the first second as steady state): most likely this, about 0.6 s of first frame
#: under that load.  A failure shows when the drops came (``first_drops``), which tells a start from a steady loss.
WARMUP_FRAMES = 30


@pytest.mark.skipif(_gpu_skip_reason() is not None, reason=str(_gpu_skip_reason()))
@pytest.mark.parametrize(("width", "height"), [(1920, 1080), (3840, 2160)])
@pytest.mark.parametrize("compose", [False, True], ids=["separate", "composed"])
def test_fanout_on_cuda(tmp_path, width, height, compose):
    frames = 150
    tensor_dtype = "bfloat16" if compose else "float16"  # the NCHW tensor preprocessing sends inference
    options = PipelineOptions(width=width, height=height, fps=30.0, memory="cuda", frames=frames,
                              namespace=f"/fanout_cuda_{height}_{int(compose)}", out_dir=tmp_path, block_count=4,
                              tensor_dtype=tensor_dtype)
    summary = run_pipeline(fanout(options), options, compose=compose, stream=None)
    print(json.dumps({k: summary[k] for k in ("mode", "source_seconds", "fps", "latency_ms", "same_process_reads")}))
    assert summary["ok"] and summary["frames_published"] == frames
    for name in CONSUMERS:
        report = summary["nodes"][name]
        # Inference reads preprocess's tensors: what preprocess sent is what it could check.
        sent = summary["nodes"]["preprocess"]["out"] if name == "inference" else frames
        assert report["bad"] == 0 and report["checked"] >= 0.9 * (sent - WARMUP_FRAMES), \
            f"{name}: checked {report['checked']} of {sent} sent; stale {report['stale']}, lost {report['lost']} " \
            f"(stale ones included), first seq {report['seq_first']}, last {report['seq_last']}; first drops (s after " \
            f"its start, what, frames) {report['first_drops']}; {json.dumps(report)}"
        assert report["same_process_reads"] == (report["reads"] if compose else 0)
    assert summary["nodes"]["camera"]["memory"] == "cuda"
    assert_tensors_between_preprocess_and_inference(summary, tensor_dtype)
    pixels = read_png(summary["preview_png"])
    assert pixels.shape == (height, width, 3)
    probe = Probe.for_image(height, width)
    assert probe.check(pixels[probe.ys, probe.xs])[1]


@pytest.mark.skipif(_gpu_skip_reason() is not None, reason=str(_gpu_skip_reason()))
@pytest.mark.parametrize("compose", [False, True], ids=["separate", "composed"])
def test_lidar_on_cuda(tmp_path, compose):
    frames = 50
    cuda_wait = "blocking" if compose else "auto"  # the container's threads sleep while the GPU works
    options = PipelineOptions(width=2048, height=128, fps=10.0, memory="cuda", frames=frames,
                              namespace=f"/lidar_cuda_{int(compose)}", out_dir=tmp_path, cuda_wait=cuda_wait)
    summary = run_pipeline(lidar(options), options, compose=compose, stream=None)
    print(json.dumps({k: summary[k] for k in ("mode", "source_seconds", "fps", "latency_ms", "same_process_reads")}))
    assert summary["ok"] and summary["frames_published"] == frames
    for name in ("voxel", "preview"):
        report = summary["nodes"][name]
        assert report["bad"] == 0 and report["checked"] >= 0.9 * frames, (name, report)
    assert read_png(summary["preview_png"]).shape == (480, 480, 3)


def _kill_when_frames_flow(tmp_path: Path, namespace: str, node: str, killed: list[int]) -> None:
    """Once the preview has drawn a frame, SIGKILL the child running ``node`` (its pid goes in ``killed``)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (tmp_path / "preview.png").exists():
        time.sleep(0.1)
    for pid in _children_in(namespace):
        if f"__node:={node}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return


@pytest.mark.long  # 40 s each: the killed participant's 20 s lease must run out before the stop (decisions.md)
@pytest.mark.parametrize("victim", ["encoder", "camera"])
def test_restart_on_failure_brings_a_killed_node_back_and_frames_flow_again(tmp_path, victim):
    import threading

    namespace = f"/fanout_restart_{victim}"
    # 40 s, not 20: the killed node's DDS participant is dropped by the others when its lease runs out, 20 s after
    # the kill (Fast DDS's default). At 20 s that drop came during the final stop and hit Fast DDS's deadlock
    # between deleting a participant and a remote one's removal (docs/decisions.md, session 4): a hang that is
    # not this test's subject, which the runner's one-at-a-time stop cannot avoid for a participant that expires.
    options = PipelineOptions(width=160, height=120, fps=8.0, memory="host", seconds=40.0, namespace=namespace,
                              out_dir=tmp_path, block_count=8)
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_frames_flow, args=(tmp_path, namespace, victim, killed))
    killer.start()
    try:
        summary = run_pipeline(fanout(options), options, stream=None, restart="on-failure")
    finally:
        killer.join()
    assert len(killed) == 1, "the node to kill was never found"
    assert summary["restarts"] == {victim: 1}, summary["restarts"]
    report = summary["nodes"][victim]
    assert report["pid"] != killed[0] and report["restarts"] == 1
    consumers = [summary["nodes"][name] for name in CONSUMERS]
    assert all(r["bad"] == 0 for r in consumers), consumers  # every frame checked, in every life, was right
    if victim == "camera":  # the new camera's frames (a new pool) reach every consumer
        assert report["out"] > 0 and all(r["checked"] > 0 for r in consumers)
    else:  # the new encoder checks frames again
        assert report["checked_this_life"] > 0, report
    assert set(summary["exit_codes"].values()) == {0}
