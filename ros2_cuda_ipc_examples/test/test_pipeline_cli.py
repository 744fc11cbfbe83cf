"""The pipeline runner as a user meets it: arguments refused before anything starts, a second pipeline in the
namespace refused, Ctrl-C (even when started with SIGINT ignored) counting consistently, a failure's reason on the
last line and its summary written, marked failed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spinning import events_executor_unavailable

from ros2_cuda_ipc_examples.pipelines.definitions import Pipeline, PipelineOptions
from ros2_cuda_ipc_examples.pipelines.runner import PipelineFailed, failure_reasons, report_failure, run_pipeline
from ros2_cuda_ipc_tools import ComponentSpec

PIPELINE = [sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.runner"]


@pytest.mark.parametrize(("args", "said"), [
    (["--namespace", "bad-ns"], "argument --namespace: '/bad-ns' is not a ROS namespace"),
    (["--out", "/proc/nope"], "argument --out: cannot write /proc/nope"),
    (["--size", "10x10"], "below the smallest fanout frame"),
    (["--size", "100000x100000"], "argument --size: 100000x100000 makes 30,000,000,000-byte frames, above the largest"),
    (["--size", "\u0661\u0662\u0660x\u0669\u0660"], "is not one of 480p, 720p, 1080p, 4k or WIDTHxHEIGHT"),
])
def test_a_bad_argument_is_refused_before_anything_starts(args, said, tmp_path):
    started = time.monotonic()
    out = subprocess.run([*PIPELINE, "fanout", "--memory", "host", *args], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    took = time.monotonic() - started
    assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("pipeline: error: "), out.stderr  # one line after usage
    assert not (tmp_path / "pipeline-output" / "logs").exists() or args[0] == "--size"
    print(f"refused in {took:.1f} s")  # shown with -s; no timing assertion on a loaded machine


def test_an_executor_this_rclpy_lacks_is_refused_before_anything_starts(tmp_path):
    """An rclpy without the C++ events executor (Humble's): one usage line, not every node process failing after its start."""
    if events_executor_unavailable() is None:
        pytest.skip("this rclpy has the events executor: nothing to refuse")
    out = subprocess.run([*PIPELINE, "fanout", "--memory", "host", "--executor", "events"], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("pipeline: error: argument --executor: executor 'events'")
    assert not (tmp_path / "pipeline-output" / "logs").exists()


def _wait_for_preview(tmp_path: Path, runner: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (tmp_path / "preview.png").exists():
        assert runner.poll() is None, runner.communicate()
        time.sleep(0.2)
    assert (tmp_path / "preview.png").exists(), "the pipeline never ran"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", [[], ["--executor", "events"], ["--executor", "events", "--compose"]],
                         ids=["single", "events", "events-composed"])
def test_ctrl_c_counts_every_checked_frame_as_published_even_when_started_with_sigint_ignored(tmp_path, how):
    """On every executor: the last reports come over the runner's request pipes (the C++ events executor takes
    no guard conditions)."""
    if how and (why := events_executor_unavailable()):
        pytest.skip(why)
    runner = subprocess.Popen([*PIPELINE, "fanout", "--size", "160x120", "--fps", "15", "--memory", "host", "--out",
                               str(tmp_path), "--namespace", f"/ctrl_c_counts_{len(how)}", *how],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # a script's `cmd &`
    try:
        _wait_for_preview(tmp_path, runner)
        time.sleep(2.0)  # frames in flight at every consumer when the stop comes
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=90)  # before: SIGINT was ignored and this ran until killed
    finally:
        runner.kill()
    assert runner.returncode == 0, err
    tables = [line for line in out.splitlines() if line.startswith("node ") and "checked" in line]
    assert len(tables) == 1, out  # not a terminal: the table once, at the end, not once a second
    summary = json.loads((tmp_path / "pipeline-summary.json").read_text())
    assert summary["interrupted"] and summary["frames_published"] > 0
    assert summary["executor"] == (how[1] if how else "single")  # which ran: said in the summary and the banner
    assert ("events executor" in out.splitlines()[0]) == bool(how), out
    for name, checked in summary["frames_checked"].items():
        assert checked <= summary["frames_published"], (name, checked, summary["frames_published"])
    nodes = summary["nodes"]  # inference reads what preprocess sends: it cannot have checked more (it did, once)
    assert nodes["inference"]["checked"] <= nodes["preprocess"]["out"], (nodes["inference"], nodes["preprocess"])
    assert "(stopped)" in out and "(the whole run: in/s and out/s over the camera's" in out, out


def _table_after(out: str, title_end: str) -> dict[str, list[str]]:
    """The rows of the table printed after the title line ending ``title_end``, by node."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(title_end)) + 2  # the title, the header
    rows = {}
    for line in lines[start:]:
        if not line or line.startswith("("):
            break
        rows[line.split()[0]] = line.split()
    return rows


@pytest.mark.timeout(240)
def test_a_run_to_its_end_prints_the_whole_run_s_table_and_outcome(tmp_path):
    """The main path: ``pipeline fanout --frames N`` to the end.  Before, its (done) table showed every rate as 0.0 and
    every p50 as '-' (the last period's, after the camera had stopped)."""
    out = subprocess.run([*PIPELINE, "fanout", "--frames", "16", "--size", "160x120", "--fps", "8", "--memory", "host",
                          "--blocks", "8", "--out", str(tmp_path), "--namespace", "/run_to_end"],
                         capture_output=True, text=True, timeout=200)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = _table_after(out.stdout, "(done)")
    assert list(rows) == ["camera", "preprocess", "inference", "encoder", "preview"], out.stdout
    assert float(rows["camera"][2]) > 0  # out/s over the run
    for name in ("preprocess", "inference", "encoder", "preview"):
        in_rate, p50, p99, checked = float(rows[name][1]), float(rows[name][3]), float(rows[name][4]), int(rows[name][8])
        assert in_rate > 0 and 0 < p50 <= p99 and 0 < checked <= 16, (name, rows[name])
    assert "(the whole run: in/s and out/s over the camera's" in out.stdout
    assert "fanout: 16 frames published" in out.stdout and "fanout: summary " in out.stdout


@pytest.mark.timeout(240)
def test_a_second_pipeline_in_the_same_namespace_is_refused_and_the_first_runs_on(tmp_path):
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    first = subprocess.Popen([*PIPELINE, "fanout", "--size", "160x120", "--fps", "10", "--memory", "host", "--out",
                              str(first_out), "--namespace", "/twice"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        _wait_for_preview(first_out, first)
        second = subprocess.run([*PIPELINE, "fanout", "--size", "160x120", "--memory", "host", "--seconds", "5",
                                 "--out", str(second_out), "--namespace", "/twice"], capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 1, second.stderr
        last = second.stderr.strip().splitlines()[-1]
        assert last.startswith("fanout: FAILED: another pipeline runs in /twice"), second.stderr
        summary = json.loads((second_out / "pipeline-summary.json").read_text())
        assert summary["ok"] is False and summary["failure"].startswith("another pipeline runs in /twice")
        if first.poll() is not None:  # the first was disturbed: say how it ended
            raise AssertionError(f"the first pipeline ended with {first.returncode}: {first.communicate()[1][-3000:]}")
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=90)
        assert first.returncode == 0, err
        first_summary = json.loads((first_out / "pipeline-summary.json").read_text())
        assert first_summary["interrupted"] and first_summary["frames_published"] > 0
    finally:
        first.kill()


def test_a_failed_run_writes_its_summary_marked_failed_and_says_why_last(tmp_path, capsys):
    options = PipelineOptions(width=160, height=120, memory="host", namespace="/failing_summary", out_dir=tmp_path)
    broken = Pipeline("broken", [ComponentSpec("ros2_cuda_ipc_examples::SyntheticCamera", "camera", "/failing_summary",
                                               {"fps": -1.0, "memory": "host"})])
    with pytest.raises(PipelineFailed) as failure:
        run_pipeline(broken, options, stream=None)
    assert failure.value.summary is not None
    assert report_failure("broken", failure.value, tmp_path) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("broken: FAILED: camera (pid ") and "exited with code 2" in err[-1]
    summary = json.loads((tmp_path / "pipeline-summary.json").read_text())
    assert summary["ok"] is False and "exited with code 2" in summary["failure"]
    assert summary["exit_codes"] == {"camera": 2}


def test_a_run_that_is_not_ok_names_each_cause():
    summary = {"source": "lidar", "frames_published": 0, "frames_checked": {"voxel": 0, "preview": 0},
               "nodes": {"lidar": {"source": True}, "voxel": {"bad": 0}, "preview": None}, "exit_codes": {"voxel": 1}}
    assert failure_reasons(summary) == ["lidar published no frame", "voxel checked no frame",
                                        "preview checked no frame", "preview never reported",
                                        "voxel exited with code 1"]


def test_pytest_keeps_its_temporary_directories_inside_the_workspace(tmp_path, request):
    if request.config.option.basetemp:
        pytest.skip("this run names its own --basetemp (tools/gpu-suite.sh gives each job a short one)")
    workspace = Path(__file__).resolve().parents[2]
    assert workspace / ".pytest-tmp" in tmp_path.parents
