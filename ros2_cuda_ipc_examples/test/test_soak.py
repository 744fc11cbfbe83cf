"""The soak tool: a one-minute run on host memory in CI, its frame check, its arguments, and its Ctrl-C."""

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ros2_cuda_ipc_examples.bench.soak import check_pattern, fill_pattern, parse_args

SOAK = [sys.executable, "-m", "ros2_cuda_ipc_examples.bench.soak"]


@pytest.mark.long
@pytest.mark.timeout(240)
def test_one_minute_soak_on_host_memory_passes():
    out = subprocess.run([*SOAK, "--minutes", "1", "--memory", "host", "--seed", "7"],
                         capture_output=True, text=True, timeout=220)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "soak: OK" in out.stdout and "FAIL" not in out.stdout
    readers = re.search(r"^reader +(\d+) +(\d+) +verified (\d+) +corrupt (\d+)", out.stdout, re.MULTILINE)
    publishers = re.search(r"^publisher +(\d+) +(\d+) +published (\d+)", out.stdout, re.MULTILINE)
    assert readers and publishers, out.stdout
    started, killed, verified, corrupt = map(int, readers.groups())
    assert killed >= 8 and started == killed + 3 and verified > 1000 and corrupt == 0
    assert int(publishers.group(2)) >= 1  # the publisher was killed and came back with a new pool
    for metric in ("fds", "rss_mib", "leases_held", "pools_open"):
        assert re.search(rf"^{metric} +reader .* ok$", out.stdout, re.MULTILINE), out.stdout


@pytest.mark.timeout(120)
def test_sigterm_ends_the_soak_with_its_table_and_status_0_and_the_logs_where_asked(tmp_path):
    logs = tmp_path / "soak-logs"
    logs.mkdir()
    (logs / "reader7-3.log").write_text("an earlier soak's reader\n")  # a reused --log-dir: it goes
    (logs / "notes.txt").write_text("the user's own\n")  # this stays
    soak = subprocess.Popen([*SOAK, "--minutes", "5", "--memory", "host", "--log-dir", str(logs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(12)
    soak.send_signal(signal.SIGTERM)
    out, err = soak.communicate(timeout=60)
    assert soak.returncode == 0, out + err
    assert "stopped by SIGTERM" in out and "role" in out and "Traceback" not in err
    last = out.strip().splitlines()[-1]  # before: "soak: OK", as if the five minutes had passed
    assert last.startswith("soak: INTERRUPTED by SIGTERM after ") and "partial results, not a pass" in last, out
    assert "soak: OK" not in out
    assert sorted(path.name for path in logs.glob("publisher0-*.log")), list(logs.iterdir())  # kept: the user's own
    assert not (logs / "reader7-3.log").exists() and (logs / "notes.txt").exists()
    assert f"soak: removed 1 process logs of an earlier soak from {logs}" in out


def test_cuda_without_a_gpu_is_refused_before_any_process_starts(tmp_path):
    pytest.importorskip("ros2_cuda_ipc_examples")
    from ros2_cuda_ipc_examples.nodes.arrays import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        pytest.skip("a usable GPU is here: --memory cuda runs")
    out = subprocess.run([*SOAK, "--memory", "cuda", "--log-dir", str(tmp_path / "logs")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "--memory cuda cannot be used here" in out.stderr, out.stderr
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").iterdir())


def test_an_executor_the_nodes_would_not_know_is_one_line_before_any_process_starts(tmp_path):
    env = {**os.environ, "ROS2_CUDA_IPC_EXECUTOR": "bogus"}
    out = subprocess.run([*SOAK, "--memory", "host", "--minutes", "0.05", "--log-dir", str(tmp_path / "logs")],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2, out.stderr
    assert "ROS2_CUDA_IPC_EXECUTOR='bogus': one of single, multi, events" in out.stderr
    assert "Traceback" not in out.stderr and "FAIL" not in out.stdout + out.stderr
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").iterdir())


def test_the_frame_check_finds_any_changed_word():
    words, ramp, scratch = np.empty(1000, np.uint64), np.arange(998, dtype=np.uint64), np.empty(998, np.uint64)
    fill_pattern(words, 41, ramp)
    assert check_pattern(words, ramp, scratch) is None
    for index in (1, 2, 500, 999):
        bad = words.copy()
        bad[index] ^= np.uint64(1 << 40)
        assert check_pattern(bad, ramp, scratch) is not None
    older = words.copy()
    fill_pattern(older, 40, ramp)
    older[0] = 41  # another frame's bytes under this frame's number
    assert "frame 41" in check_pattern(older, ramp, scratch)


@pytest.mark.parametrize("argv", [["--minutes", "0"], ["--readers", "0"], ["--rate", "-1"], ["--size-mib", "0"],
                                  ["--memory", "gpu"], ["--publisher-kill-every", "0"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2 and "error" in capsys.readouterr().err


@pytest.mark.long
@pytest.mark.timeout(300)
def test_one_minute_pipeline_soak_kills_nodes_and_every_frame_stays_right(tmp_path):
    out = subprocess.run([*SOAK, "--pipeline", "fanout", "--minutes", "1", "--memory", "host", "--seed", "7",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "soak: OK" in out.stdout and "FAIL" not in out.stdout, out.stdout
    counts = re.search(r"^soak: (\d+) frames published; checked: (.*); kills: (.*); restarts: (\d+)$", out.stdout,
                       re.MULTILINE)
    assert counts, out.stdout
    kills = sum(int(part.split()[-1]) for part in counts.group(3).split(", "))
    assert kills >= 5 and int(counts.group(4)) == kills  # every killed node came back
    checked = [int(part.split()[-1]) for part in counts.group(2).split(", ")]
    assert all(checked) and max(checked) <= int(counts.group(1)), out.stdout  # before: 221 published, encoder 230
    for metric in ("fds", "rss_mib", "leases_held"):  # sampled for every node, and none grew
        assert len(re.findall(rf"^{metric} +\w+ +first .* ok$", out.stdout, re.MULTILINE)) == 5, out.stdout


def test_pipeline_soak_refuses_a_bad_rate():
    out = subprocess.run([*SOAK, "--pipeline", "fanout", "--fps", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--fps must be in" in out.stderr


def test_help_lists_the_pipeline_soak_and_every_pipeline_it_takes():
    """Before: soak --help did not mention --pipeline (main hands it to pipeline_soak before parsing)."""
    from ros2_cuda_ipc_examples.pipelines.definitions import PIPELINES

    out = subprocess.run([*SOAK, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    entry = out.stdout[out.stdout.index("\n  --pipeline"):]
    assert all(name in entry.split("\n  --")[1] for name in PIPELINES), entry
    assert "soak --pipeline fanout --help" in " ".join(entry.split())


def test_pipeline_soak_usage_names_pipeline_once():
    """Before: 'usage: soak --pipeline [-h] --pipeline {fanout,lidar} ...'."""
    out = subprocess.run([*SOAK, "--pipeline", "foo"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("usage: soak [-h] [--version] --pipeline {fanout,lidar}"), out.stderr
    assert out.stderr.count("--pipeline") == 2, out.stderr  # the usage's and the error's
    assert out.stderr.strip().splitlines()[-1] == ("soak: error: argument --pipeline: invalid choice: 'foo' "
                                                   "(choose from 'fanout', 'lidar')")


def test_pipeline_soak_refuses_a_frame_size_with_a_zero_too_many():
    out = subprocess.run([*SOAK, "--pipeline", "fanout", "--size", "100000x100000"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "above the largest fanout frame" in out.stderr.strip().splitlines()[-1], out.stderr


def test_the_soak_s_default_output_is_ignored_by_git():
    repo = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None or not (repo / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "-q", "soak-output/pipeline-summary.json"], cwd=repo, timeout=30)
    assert out.returncode == 0, "soak-output/ is not in .gitignore"


@pytest.mark.timeout(240)
def test_ctrl_c_ends_a_pipeline_soak_as_interrupted_with_its_summary_and_only_this_run_s_logs(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "voxel.log").write_text("a lidar soak's node, from an earlier run into this --out\n")
    soak = subprocess.Popen([*SOAK, "--pipeline", "fanout", "--minutes", "5", "--memory", "host", "--seed", "3",
                             "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (tmp_path / "preview.png").exists():  # frames flow
            assert soak.poll() is None, soak.communicate()
            time.sleep(0.2)
        soak.send_signal(signal.SIGINT)
        out, err = soak.communicate(timeout=120)
    finally:
        soak.kill()
    assert soak.returncode == 0, out + err
    last = out.strip().splitlines()[-1]
    assert last.startswith("soak: INTERRUPTED after ") and "partial results, not a pass" in last, out
    assert "soak: OK" not in out and "Traceback" not in err, out + err
    # the runner clears a reused --out's node logs: this run's only
    assert not (tmp_path / "logs" / "voxel.log").exists() and (tmp_path / "logs" / "camera.log").exists()
    summary = json.loads((tmp_path / "pipeline-summary.json").read_text())
    assert summary["interrupted"] and summary["soak"]["verdict"] == "interrupted"


def test_a_node_is_sampled_for_growth_only_after_its_first_frame():
    """Before: a node's first samples were taken 5 s after its start, frame or no frame; preprocess makes its
    output pool (on a GPU: a CUDA context, 20 fds more) at its first frame, so on the H100 a late first frame put
    53 fds in the first window and 74 in every later sample: 'growth in preprocess fds' with nothing growing."""
    import random

    from ros2_cuda_ipc_examples.bench.pipeline_soak import STARTUP_GRACE, PipelineSoak
    from ros2_cuda_ipc_examples.pipelines.live_table import StatsTable

    soak, table, pid = PipelineSoak(random.Random(1), 60.0), StatsTable(["camera", "preprocess"]), os.getpid()
    report = {"node": "/ns/preprocess", "pid": pid, "time": time.time(), "in": 0, "out": 0, "checked": 0, "bad": 0,
              "stale": 0, "lost": 0, "gone": 0}
    table.add("preprocess", report)
    soak(table, {"preprocess": pid})  # its life starts now
    later = time.monotonic() + STARTUP_GRACE + 1
    soak._sample(table, {"preprocess": pid}, later)
    assert soak.lives["preprocess"][-1].samples == []  # past start-up, no frame yet: not sampled
    table.add("preprocess", {**report, "in": 1, "out": 1, "checked": 1})
    soak._sample(table, {"preprocess": pid}, later + 1)
    [sample] = soak.lives["preprocess"][-1].samples
    assert sample["fds"] > 0 and soak.lives["preprocess"][-1].first_fds


def test_a_consumer_that_never_gets_a_frame_is_a_stall():
    """The growth sampling waits for a node's first frame; the stall check must not (a review found it did: a
    subscription DDS never matched reported in=0 for ever and the soak passed)."""
    import random

    from ros2_cuda_ipc_examples.bench.pipeline_soak import STALL, STARTUP_GRACE, PipelineSoak, SoakFailed
    from ros2_cuda_ipc_examples.pipelines.live_table import StatsTable

    soak, table, pid = PipelineSoak(random.Random(1), 60.0), StatsTable(["camera", "encoder"]), os.getpid()
    counts = {"in": 0, "out": 0, "checked": 0, "bad": 0, "stale": 0, "lost": 0, "gone": 0}
    table.add("camera", {"node": "/ns/camera", "pid": pid + 1, "time": time.time(), "source": True,
                         **counts, "out": 500})
    table.add("encoder", {"node": "/ns/encoder", "pid": pid, "time": time.time(), **counts})
    soak(table, {"encoder": pid})  # its life starts now; the camera is not sampled (no pid given)
    with pytest.raises(SoakFailed, match=r"encoder .* checked no frame"):
        soak._sample(table, {"encoder": pid}, time.monotonic() + STARTUP_GRACE + STALL + 1)


_CHILD = """
import signal, sys, time
name, ignore = sys.argv[1], sys.argv[2] == "ignore"
def stop(*_):
    if ignore:
        return
    print(f"{name} {time.monotonic()}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
print("up", flush=True)
while True:
    time.sleep(0.01)
"""


@contextlib.contextmanager
def _children(tmp_path):
    """``start(role, slot, ignore)``: a child process that says "up", and on SIGINT prints its name and the time
    and ends (or, with ``ignore``, goes on); every one is killed and its pipe closed on the way out."""
    procs = []

    def start(role, slot, ignore="obey"):
        log = open(tmp_path / f"{role}{slot}.log", "w")  # noqa: SIM115 (closed by the soak's reap)
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, f"{role}{slot}", ignore], stdout=subprocess.PIPE,
                                stderr=log, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        return proc, log

    try:
        yield start
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
            proc.stdout.close()


def _supervisor(tmp_path, soak_module):
    args = soak_module.parse_args(["--minutes", "1", "--memory", "host", "--log-dir", str(tmp_path / "logs")])
    return soak_module.Soak(args, io.StringIO())


@pytest.mark.timeout(90)
def test_the_soak_stops_its_children_one_at_a_time_the_publisher_first_and_shows_a_hung_one_s_threads(
        tmp_path, monkeypatch):
    """All at once, every reader deleted its DDS participant while the others' removals reached it, Fast DDS 3.2's
    deadlock trigger (the H100 suite, session 17: 'reader 0 ignored SIGINT for 10 s', no stacks to say why)."""
    from ros2_cuda_ipc_examples.bench import soak as soak_module

    monkeypatch.setattr(soak_module, "STOP_WAIT", 2.0)
    supervisor = _supervisor(tmp_path, soak_module)
    with _children(tmp_path) as start:
        for role, slot, ignore in (("reader", 0, "ignore"), ("reader", 1, "obey"), ("publisher", 0, "obey")):
            proc, log = start(role, slot, ignore)
            now = time.monotonic()
            supervisor.children.append(soak_module.Child(role, slot, proc, log, now, reported_at=now, progress_at=now))
        procs = {f"{c.role}{c.slot}": c.proc for c in supervisor.children}
        supervisor.stop_all()
        assert supervisor.children == []
        ended = {name: float(procs[name].stdout.read().split()[1]) for name in ("publisher0", "reader1")}
    assert ended["reader1"] - ended["publisher0"] >= 2.0  # the publisher first, then reader 0's whole wait
    assert len(supervisor.failures) == 1, supervisor.failures
    failure = supervisor.failures[0]
    assert failure.startswith("reader 0 (pid ") and "ignored SIGINT for 2 s" in failure
    assert "threads of pid" in failure and "tid" in failure  # where each of its threads waited
    assert "still running 2 s after SIGINT" in (tmp_path / "reader0.log").read_text()


@pytest.mark.timeout(90)
def test_a_reader_that_verifies_nothing_is_a_hang_shown_with_its_last_report_and_its_threads(tmp_path, monkeypatch):
    """The H100 suite (session 17): 'reader 2 verified no frame for 15 s' and nothing else to say why."""
    from ros2_cuda_ipc_examples.bench import soak as soak_module

    monkeypatch.setattr(soak_module, "READER_STALL", 0.2)
    supervisor = _supervisor(tmp_path, soak_module)
    respawned = []
    monkeypatch.setattr(supervisor, "spawn", lambda role, slot: respawned.append((role, slot)))
    long_ago = time.monotonic() - 10
    with _children(tmp_path) as start:
        for role, slot in (("publisher", 0), ("reader", 2)):
            proc, log = start(role, slot)
            child = soak_module.Child(role, slot, proc, log, long_ago, reported_at=time.monotonic(),
                                      progress_at=time.monotonic() if role == "publisher" else long_ago)
            child.report = {"verified": 0, "stale": 0, "publishers_seen": 0} if role == "reader" else {"published": 9}
            supervisor.children.append(child)
        supervisor.check_health()
        assert respawned == [("reader", 2)] and [c.role for c in supervisor.children] == ["publisher"]
        supervisor.stop_all()
    assert len(supervisor.failures) == 1, supervisor.failures
    failure = supervisor.failures[0]
    assert failure.startswith("hang: reader 2 (pid ") and "verified no frame for 0.2 s" in failure
    assert '"publishers_seen": 0' in failure and "threads of pid" in failure
