"""The benchmark command: a seconds-long run of both modes on host memory writes well-formed outputs;
bad arguments fail at once with one line; a dying consumer is reported at once; Ctrl-C ends it cleanly."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ros2_cuda_ipc_core import BlockManager, CudaUnavailableError

COMMAND = [sys.executable, "-m", "ros2_cuda_ipc_examples.bench.benchmark"]
SMOKE = ["--memory", "host", "--payloads", "64x48", "ouster", "--frames", "6", "--warmup", "1", "--rates", "20"]
PAYLOAD_BYTES = {"64x48": 64 * 48 * 4, "ouster": 128 * 1024 * 48}


def _has_gpu() -> bool:
    try:
        with BlockManager(1, block_count=1, memory="cuda"):
            return True
    except CudaUnavailableError:
        return False


def test_both_modes_on_host_memory_write_well_formed_outputs(tmp_path: Path) -> None:
    out = subprocess.run([*COMMAND, *SMOKE, "--reuse-delay", "0", "--out", str(tmp_path / "run")], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr

    run = json.loads((tmp_path / "run" / "results.json").read_text())
    assert run["command"][0] == "benchmark" and run["settings"]["memory_used"] == "host"
    assert run["settings"]["reuse_delay"] == 0
    assert run["machine"]["cpu_count"] >= 1 and run["machine"]["rmw"]
    cases = [(row["mode"], row["payload"], row["transport"]) for row in run["results"]]
    assert sorted(cases) == sorted((mode, payload, transport) for mode in ("latency", "throughput")
                                   for payload in PAYLOAD_BYTES for transport in ("host", "sensor_msgs", "fallback", "floor"))
    for row in run["results"]:
        assert row["payload_bytes"] == PAYLOAD_BYTES[row["payload"]]
        assert row["bad"] == 0 and row["verified"] > 0, row
        assert row["verified"] + row["dropped"] == row["measured_sent"] <= row["frames"] == 6  # late ticks: not sent
        ready = row["stats_us"]["ready"]
        assert ready["n"] == row["verified"] == len(row["samples_us"]["ready"])
        assert 0 < ready["p50"] <= ready["p90"] <= ready["p99"] <= ready["max"]
        if row["transport"] != "floor":
            assert {"arrival", "read", "view", "wait", "work", "release", "send"} <= set(row["stats_us"])
        # host blocks are complete when published: no stream ever waits; the floor and the copies read no block
        assert row["gpu_waits"] == (0 if row["transport"] == "host" else None), row
        if row["verified"] >= 2:  # CPU per frame needs two measured frames at each end
            assert row["cpu_ms_per_frame"]["producer"] > 0 and row["cpu_ms_per_frame"]["consumer"] > 0, row
        if row["mode"] == "throughput" and row["transport"] != "fallback":
            assert row["verified"] == 6 and row["fps"] > 0  # acknowledged flow control: nothing may be lost
        elif row["mode"] == "throughput":  # the twin drops a frame offered while it converts one: counted, not waited
            assert row["fps"] > 0
        else:
            assert row["rate_hz"] == 20

    table = (tmp_path / "run" / "results.md").read_text()
    assert "4 blocks per pool, each reused no sooner than 0 ms after it was published" in table
    assert table.count("CPU ms/frame producer / consumer") == 2  # the latency and throughput tables
    for heading in ("### Latency at 20 Hz", "### Where the time goes at 20 Hz", "### Throughput"):
        assert heading in table and heading in out.stdout
    for payload in PAYLOAD_BYTES:
        assert table.count(f"| {payload} |") == 4 * 3  # latency, split and throughput rows of four transports
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed: no plots" in out.stdout
    else:
        for name in ("latency_cdf.png", "fps.png"):
            png = (tmp_path / "run" / name).read_bytes()
            assert png[:8] == b"\x89PNG\r\n\x1a\n"
            width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # IHDR
            assert width >= 1200 and height >= 800, f"{name} is {width} x {height} px (before: about 250 x 200)"


def test_the_typed_subscription_rows_verify_every_frame(tmp_path: Path) -> None:
    """The opt-in rows read by an ImageSubscription / PointCloudSubscription, in the executor and directly."""
    out = subprocess.run([*COMMAND, *SMOKE, "--mode", "latency", "--transports", "floor", "host-subscription",
                          "host-direct", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads((tmp_path / "results.json").read_text())["results"]
    assert sorted((row["payload"], row["transport"]) for row in rows) == sorted(
        (payload, transport) for payload in PAYLOAD_BYTES for transport in ("floor", "host-subscription", "host-direct"))
    for row in rows:
        assert row["bad"] == 0 and row["dropped"] == 0 and row["verified"] == row["measured_sent"] > 0, row
    assert "ros2_cuda_ipc host, typed subscription" in out.stdout


def _gpu_library() -> str | None:
    return next((name for name in ("torch", "cupy") if importlib.util.find_spec(name) is not None), None)


@pytest.mark.skipif(not _has_gpu() or _gpu_library() is None, reason="needs a CUDA GPU and torch or cupy")
def test_cuda_rows_verify_every_frame_on_a_gpu(tmp_path: Path) -> None:
    out = subprocess.run([*COMMAND, "--memory", "cuda", "--payloads", "640x480", "ouster", "--frames", "6", "--warmup", "1",
                          "--rates", "20", "--transports", "cuda", "cuda-subscription", "cuda-direct", "host",
                          "sensor_msgs", "fallback", "floor", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    run = json.loads((tmp_path / "results.json").read_text())
    assert run["settings"]["memory_used"] == "cuda" and run["settings"]["gpu_library_used"] == _gpu_library()
    assert run["machine"]["gpu"]
    transports = {row["transport"] for row in run["results"]}
    assert transports == {"cuda", "cuda-subscription", "cuda-direct", "host", "sensor_msgs", "fallback", "floor"}
    for row in run["results"]:
        assert row["bad"] == 0, row
        if row["transport"] in ("cuda-subscription", "cuda-direct") and row["mode"] == "latency":
            assert row["verified"] == row["frames"] == 6, row  # the subscription's read, then the same reduction
        if row["transport"] == "cuda":
            counts = {key: row[key] for key in ("frames", "received", "measured", "verified", "stale", "errors", "last_error")}
            assert row["verified"] == row["frames"] == 6, counts  # the consumer's reduction on its own stream saw every frame
            assert {"read", "view", "wait", "work", "release"} <= set(row["stats_us"])
        if row["transport"] in ("cuda", "cuda-subscription", "cuda-direct", "host"):  # frames that waited on the GPU
            assert 0 <= row["gpu_waits"] <= row["measured"], row
        else:  # the floor, sensor_msgs and the CPU twin read no block
            assert row["gpu_waits"] is None, row


BAD_ARGUMENTS = [
    (["--rates", "0"], "--rates: 0 is outside 0.1..10000"),
    (["--frames", "0"], "--frames: 0 is outside 1..1e+06"),
    (["--frames", "-1"], "--frames: -1 is outside"),
    (["--frames", "ten"], "--frames: 'ten' is not an integer"),
    (["--payloads", "1920x"], "expected WIDTHxHEIGHT"),
    (["--payloads", "3x3"], "even pixel count"),
    (["--in-flight", "4", "--blocks", "4"], "--in-flight 4 must be below --blocks 4"),
    (["--memory", "host", "--transports", "cuda"], "no transport left"),
    (["--mode", "fast"], "invalid choice: 'fast'"),
    (["--case-seconds", "0"], "--case-seconds: 0 is outside 1..3600"),
    (["--reuse-delay", "-0.01"], "--reuse-delay: -0.01 is outside 0..1"),
    (["--reuse-delay", "nan"], "--reuse-delay: nan is outside 0..1"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGUMENTS)
def test_bad_arguments_fail_at_once_with_one_clear_line(argv: list[str], message: str, tmp_path: Path) -> None:
    started = time.monotonic()
    out = subprocess.run([*COMMAND, *argv, "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert time.monotonic() - started < 30  # checked when parsing, not after a run or a timeout


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_one_line() -> None:
    out = subprocess.run([*COMMAND, "--memory", "cuda"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--memory cuda: no usable CUDA driver" in out.stderr or "--memory cuda: cuda-python" in out.stderr


def test_help_shows_every_default() -> None:
    out = subprocess.run([*COMMAND, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    options = [line.split()[0] for line in out.stdout.splitlines() if line.lstrip().startswith("--")
               and not line.lstrip().startswith("--version")]
    assert len(options) >= 10
    assert out.stdout.count("(default:") == len(options)  # every option but --help and --version says its default


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def _start_long_run(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """A run that would take minutes; returns it once its consumer process exists and has had time to start."""
    run = subprocess.Popen([*COMMAND, "--memory", "host", "--payloads", "64x48", "--frames", "2000", "--rates", "20",
                            "--transports", "floor", "--out", str(tmp_path)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _children(run.pid) and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.1)
    assert _children(run.pid), "the benchmark started no consumer process"
    time.sleep(4)
    return run, _children(run.pid)[0]


def test_a_dying_consumer_is_reported_at_once(tmp_path: Path) -> None:
    run, consumer = _start_long_run(tmp_path)
    os.kill(consumer, signal.SIGKILL)
    killed = time.monotonic()
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 1, stdout + stderr
    assert time.monotonic() - killed < 15  # not after a timeout of the run's length
    assert f"the consumer process (pid {consumer}) exited with code -9" in stderr
    assert "Traceback" not in stderr


def test_sigint_ends_the_run_with_exit_0_and_no_traceback(tmp_path: Path) -> None:
    """Before the first case ends: nothing is written, and it says so (before: '(written as results-partial.*)')."""
    run, consumer = _start_long_run(tmp_path)
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 0, stdout + stderr
    assert "Traceback" not in stderr
    assert "benchmark: interrupted by Ctrl-C after 0 of 2 cases in " in stdout, stdout
    assert stdout.rstrip().endswith("(nothing written: no case had ended)"), stdout
    assert not list(tmp_path.glob("results*")), list(tmp_path.iterdir())
    assert not Path(f"/proc/{consumer}").exists() or "zombie" in Path(f"/proc/{consumer}/status").read_text()


def test_an_interrupted_run_is_written_as_partial_and_says_so(tmp_path: Path) -> None:
    """Ctrl-C after the first case: results-partial.* marked partial, a full run's results.* left alone, no 'done'."""
    (tmp_path / "results.md").write_text("a full run\n")
    bench = subprocess.Popen([*COMMAND, "--memory", "host", "--payloads", "64x48", "ouster", "--frames", "400",
                              "--warmup", "1", "--rates", "20", "--out", str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert bench.stdout is not None
    try:
        for line in bench.stdout:
            if line.startswith("[1/") and ": frame" not in line.rsplit("\r", 1)[-1]:  # the first case finished
                break
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=120)
    finally:
        bench.kill()
    assert bench.returncode == 0 and "Traceback" not in err, err
    assert "benchmark: interrupted by Ctrl-C after 1 of " in out and "done in" not in out, out
    assert (tmp_path / "results.md").read_text() == "a full run\n"
    partial = json.loads((tmp_path / "results-partial.json").read_text())
    assert partial["partial"]["stopped_by"] == "Ctrl-C" and partial["partial"]["cases_done"] == len(partial["results"])
    assert (tmp_path / "results-partial.md").read_text().startswith("**Partial run: stopped by Ctrl-C after ")


def _png_whole(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and data[-12:-4] == b"\x00\x00\x00\x00IEND"


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="plots need matplotlib")
def test_sigint_while_plotting_says_what_was_written_and_that_it_was_interrupted(tmp_path: Path) -> None:
    """Before: no PNG, no 'wrote' line and no 'interrupted' line.  The signal is sent once the run says it draws
    (importing matplotlib alone takes a second); a run whose plots were all drawn by then is run again."""
    for _attempt in range(3):
        out_dir = tmp_path / f"run{_attempt}"
        bench = subprocess.Popen([*COMMAND, "--memory", "host", "--payloads", "64x48", "--frames", "3", "--warmup", "1",
                                  "--rates", "20", "--transports", "floor", "--out", str(out_dir)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert bench.stdout is not None
        try:
            lines = []
            for line in bench.stdout:
                lines.append(line)
                if line.startswith("benchmark: drawing the plots"):
                    bench.send_signal(signal.SIGINT)
                    break
            rest, err = bench.communicate(timeout=60)
        finally:
            bench.kill()
        out = "".join(lines) + rest
        assert bench.returncode == 0 and "Traceback" not in err, out + err
        if "benchmark: done in" not in out:
            break
    wrote = next(line for line in out.splitlines() if line.startswith("benchmark: wrote "))
    assert wrote.startswith(f"benchmark: wrote {out_dir / 'results.json'}, {out_dir / 'results.md'}"), out
    assert "benchmark: plotting interrupted" in out, out
    assert out.rstrip().splitlines()[-1].startswith("benchmark: interrupted by Ctrl-C while plotting, after all 2 cases"), out
    assert json.loads((out_dir / "results.json").read_text())["results"]
    assert not list(out_dir.glob(".*.writing")), list(out_dir.iterdir())  # no half-written file
    assert all(_png_whole(png) for png in out_dir.glob("*.png"))
