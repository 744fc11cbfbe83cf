"""tools/gpu-suite.sh, the GPU machine's one-call suite, checked where it can be without a GPU: its jobs' summary,
its whole-call budget (jobs not started are listed, the results partial), and its stop on SIGTERM (every job's
processes gone, the summary so far, exit code 0, PARTIAL said)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu-suite.sh"


#: The script's jobs here run on ROS domains 10 and up, not on the 60 and up of a suite that runs this test.
ENV = {**os.environ, "GPU_SUITE_DOMAINS": "10"}


def _suite(*args: str, logs: Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(["bash", str(SCRIPT), "-o", str(logs), *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**ENV, **(env or {})})


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_files_run_as_jobs_and_the_budget_leaves_the_rest_unrun(tmp_path):
    sleeper = tmp_path / "test_outlasts_the_budget.py"  # longer than the budget on any machine
    sleeper.write_text("import time\n\n\ndef test_sleeps():\n    time.sleep(300)\n")
    suite = _suite("-j", "1", "-T", "30", "-f", f"ros2_cuda_ipc_core/test/test_no_driver.py {sleeper} "
                   "tools/test/test_wheel_quirks.py", logs=tmp_path / "logs")
    out = suite.communicate(timeout=240)[0]
    lines = out.splitlines()
    assert any(line.startswith("ok") and "ros2_cuda_ipc_core/test/test_no_driver.py" in line for line in lines), out
    assert suite.returncode == 1 and "PARTIAL results" in lines[-1], out
    assert any(line.startswith(("NOT RUN", "FAIL")) for line in lines), out  # the 30 s ran out in the sleeper
    assert (tmp_path / "logs" / "ros2_cuda_ipc_core_test_test_no_driver.log").exists()


def test_sigterm_ends_it_with_the_jobs_and_says_the_results_are_partial(tmp_path):
    logs = tmp_path / "logs"
    suite = _suite("-j", "2", "-f", "tools/test/test_gpu_selection.py ros2_cuda_ipc_tools/test/test_viewer_peer.py",
                   logs=logs)
    deadline = time.monotonic() + 120
    while len(list(logs.glob("*.group"))) < 2:  # both jobs started, each in its process group
        assert suite.poll() is None and time.monotonic() < deadline, suite.communicate()[0]
        time.sleep(0.1)
    groups = [int(path.read_text()) for path in logs.glob("*.group")]
    suite.send_signal(signal.SIGTERM)
    out = suite.communicate(timeout=30)[0]
    assert suite.returncode == 0, out
    assert out.rstrip().endswith("gpu-suite: interrupted: the results above are PARTIAL"), out
    assert out.count("STOPPED") == 2, out
    rows = [line.split() for line in subprocess.run(["ps", "-e", "-o", "pgid=,stat=,args="], capture_output=True,
                                                    text=True).stdout.splitlines()]
    left = [row for row in rows if int(row[0]) in groups and not row[1].startswith("Z")]  # zombies wait for init
    assert not left, left


def test_a_log_folder_it_did_not_make_is_not_emptied(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    refused = subprocess.run(["bash", str(SCRIPT), "-o", str(tmp_path), "-f", "tools/test/test_gpu_verify.py"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "refusing to empty it" in refused.stderr, refused.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_test_ids_with_spaces_and_brackets_are_jobs_of_their_own(tmp_path):
    """A slow file's tests are jobs of their own; ids parametrized by text hold spaces and brackets (the H200's run
    of session 9 split such ids at their spaces: 60 jobs failed with "unrecognized arguments")."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the fake checkout's root, not the one around it
    slow = tmp_path / "ros2_cuda_ipc_tools" / "test" / "test_bag.py"
    slow.parent.mkdir(parents=True)
    slow.write_text('import pytest\n\n\n@pytest.mark.parametrize("text", ["--blocks 4", "must be >= 0, not inf", "[-1.0]",'
                    ' "a\\nb"])\ndef test_text(text):\n    assert text\n')
    suite = _suite("-j", "2", "-T", "200", logs=tmp_path / "logs", cwd=tmp_path)
    out = suite.communicate(timeout=240)[0]
    assert suite.returncode == 0, out
    assert out.rstrip().splitlines()[-1].startswith("gpu-suite: 4 of 4 jobs passed"), out
    assert len(list((tmp_path / "logs").glob("*.log"))) == 4, out  # a log each: no two ids share a name


def test_what_a_job_leaves_in_a_session_of_its_own_is_listed_and_killed(tmp_path):
    """A pipeline's nodes run in sessions of their own: a job's process group does not hold them, its mark does."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    test = tmp_path / "ros2_cuda_ipc_core" / "test" / "test_leaves.py"
    test.parent.mkdir(parents=True)
    marker = tmp_path / "left.pid"
    test.write_text("import subprocess\n\n\ndef test_leaves():\n"
                    "    left = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                    f"    open({str(marker)!r}, 'w').write(str(left.pid))\n")
    out = _suite("-j", "1", "-T", "100", logs=tmp_path / "logs", cwd=tmp_path).communicate(timeout=200)[0]
    assert "gpu-suite: 1 of 1 jobs passed" in out, out
    pid = int(marker.read_text())
    log = (tmp_path / "logs" / "ros2_cuda_ipc_core_test_test_leaves.log").read_text()
    assert "still running in a session of its own (killed now)" in log and f"{pid} " in log, log
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]:
        assert time.monotonic() < deadline, f"sleep {pid} still runs"
        time.sleep(0.1)


def test_a_slow_file_that_does_not_import_is_a_failing_job_not_a_missing_one(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    slow = tmp_path / "ros2_cuda_ipc_tools" / "test" / "test_bag.py"
    slow.parent.mkdir(parents=True)
    slow.write_text("import no_such_module_here\n\n\ndef test_never():\n    pass\n")
    suite = _suite("-j", "1", "-T", "100", logs=tmp_path / "logs", cwd=tmp_path)
    out = suite.communicate(timeout=200)[0]
    assert suite.returncode == 1, out
    assert any(line.startswith("FAIL") and "ros2_cuda_ipc_tools/test/test_bag.py" in line for line in out.splitlines()), out


def test_a_domain_base_that_would_meet_other_domains_is_refused(tmp_path):
    for base in ("abc", "30", "70", "-1"):
        refused = subprocess.run(["bash", str(SCRIPT), "-o", str(tmp_path / "logs"), "-f", "x.py"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=60, env={**ENV, "GPU_SUITE_DOMAINS": base})
        assert refused.returncode == 2 and "GPU_SUITE_DOMAINS must be" in refused.stderr, (base, refused.stderr)


def test_a_file_of_short_tests_runs_six_a_job(tmp_path):
    """test_cli.py's 78 tests were 78 jobs, most of each pytest's own start; now 6 tests a job."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    cli = tmp_path / "ros2_cuda_ipc_examples" / "test" / "test_cli.py"
    cli.parent.mkdir(parents=True)
    cli.write_text('import pytest\n\n\n@pytest.mark.parametrize("n", [f"run {i}" for i in range(8)])\n'
                   'def test_short(n):\n    assert n\n')
    out = _suite("-j", "2", "-T", "200", logs=tmp_path / "logs", cwd=tmp_path).communicate(timeout=240)[0]
    assert out.rstrip().splitlines()[-1].startswith("gpu-suite: 2 of 2 jobs passed"), out
    assert "(6 tests)" in out and "(2 tests)" in out and "6 passed" in out and "2 passed" in out, out


def test_jobs_start_longest_first_by_the_table_of_seconds(tmp_path):
    """The parallel jobs start in the order of a run's seconds (GPU_SUITE_SECONDS), a job it does not list at 5 s:
    a minute-long file started last in name order made the tail of the call. The summary lists the jobs in the
    order planned, which with one job at a time is the order they started."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name in ("test_a.py", "test_b.py", "test_c.py"):
        (tmp_path / name).write_text("def test_quick():\n    pass\n")
    table = tmp_path / "seconds.txt"
    table.write_text("# seconds job\n60 test_c\n2 test_a\n")
    suite = _suite("-j", "1", "-f", "test_a.py test_b.py test_c.py", logs=tmp_path / "logs", cwd=tmp_path,
                   env={"GPU_SUITE_SECONDS": str(table)})
    out = suite.communicate(timeout=120)[0]
    jobs = [line.split()[3] for line in out.splitlines() if line.startswith("ok ")]  # ok, seconds, s, the job
    assert jobs == ["test_c.py", "test_b.py", "test_a.py"], out


def test_a_failure_before_a_hang_is_in_the_log_of_a_job_cut_at_its_limit(tmp_path):
    """A job cut at its limit is killed without pytest's summary: its earlier failures are written when they happen
    (test_support/failure_at_once.py), here the reason of the first test's failure before the second's hang."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["failure_at_once"]\n')
    test = tmp_path / "ros2_cuda_ipc_core" / "test" / "test_fails_then_hangs.py"
    test.parent.mkdir(parents=True)
    test.write_text("import signal\nimport time\n\n\ndef test_fails():\n    assert 6 * 7 == 41, 'the reason, kept'\n\n\n"
                    "def test_hangs():\n    signal.signal(signal.SIGINT, signal.SIG_IGN)\n    time.sleep(300)\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "test_support"), os.environ.get("PYTHONPATH")]))}
    suite = _suite("-j", "1", "-t", "15", "-T", "100", logs=tmp_path / "logs", cwd=tmp_path, env=env)
    out = suite.communicate(timeout=200)[0]
    assert suite.returncode == 1 and "cut at its time limit" in out, out
    log = (tmp_path / "logs" / "ros2_cuda_ipc_core_test_test_fails_then_hangs.log").read_text()
    assert "failed, at once (call): ros2_cuda_ipc_core/test/test_fails_then_hangs.py::test_fails" in log, log
    assert "the reason, kept" in log and "short test summary" not in log, log


def test_help_is_the_whole_header():
    shown = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0 and shown.stdout.startswith("The whole test suite in one call"), shown.stdout
    assert shown.stdout.rstrip().endswith("workspace's environment sourced."), shown.stdout
    assert "JOBS (default: one a CPU core" in shown.stdout, shown.stdout
