"""The runner reads ``pipeline_stats`` as untrusted input: every message parsed within bounds (a property test of
time, by counting calls, and of memory, with tracemalloc, against the input's size), only its own nodes' signed
reports taken, and a pipeline run to its end, its verdict its own, beside a peer sending forgeries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ros2_cuda_ipc_examples.nodes.report_signature import new_report_key, sign_report, signed_body
from ros2_cuda_ipc_examples.pipelines.reports import (
    MAX_REPORT_CHARS,
    OwnReportMalformed,
    ReportGate,
    ReportRejected,
    parse_report,
)

GENUINE = {"node": "/lidar/voxel", "kind": "VoxelDownsample", "pid": 4242, "time": 1_800_000_000.5, "in": 40,
           "out": 40, "checked": 40, "bad": 0, "stale": 0, "lost": 0, "gone": 0, "in_by_publisher": {"4241": 40},
           "latency_ms": {"p50": 2.0, "p99": 9.5, "n": 10}, "latency_ms_total": {"p50": 2.0, "p99": 9.5, "n": 40},
           "cpu": {"cpu_s": 0.5, "cpu_percent": 3.0, "cpu_ms_per_frame": None,
                   "cpu_ms_per_frame_steady_by_thread": {"main": 1.5, "dds.rx": 0.25, "ended": 0}},
           "first_drops": [[0.5, "stale", 1]],
           "leases_held": 0, "output": "GpuPointCloud2 4096 points", "seq_first": 0, "seq_last": 39}


def _cost(data: str) -> tuple[int, int]:
    """(Python function calls, tracemalloc peak in bytes) of parsing ``data``; ReportRejected is a fine outcome,
    anything else raised fails the test."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    tracemalloc.start()
    sys.setprofile(count)
    try:
        parse_report(data)
    except ReportRejected:
        pass
    finally:
        sys.setprofile(None)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return calls, peak


def _assert_bounded(data: str) -> None:
    calls, peak = _cost(data)
    assert calls <= 4 * len(data) + 200, (calls, len(data))
    assert peak <= 80 * len(data) + 64 * 1024, (peak, len(data))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda children: st.lists(children) | st.dictionaries(st.text(), children), max_leaves=60)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=2000))
def test_any_text_is_parsed_or_refused_in_bounded_time_and_memory(text):
    _assert_bounded(text)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_any_json_is_parsed_or_refused_in_bounded_time_and_memory(value):
    _assert_bounded(json.dumps(value))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(GENUINE)), json_values)
def test_a_report_with_any_field_changed_is_parsed_with_its_types_or_refused(key, value):
    data = json.dumps({**GENUINE, key: value})
    _assert_bounded(data)
    try:
        report = parse_report(data)
    except ReportRejected:
        return
    for counter in ("in", "out", "checked", "bad", "stale", "lost", "gone"):
        assert type(report[counter]) is int and report[counter] >= 0
    assert type(report["pid"]) is int and report["node"].isprintable()
    assert all(str(pid).isdigit() and pid.isascii() for pid in report.get("in_by_publisher", {}))


@pytest.mark.parametrize("data", [
    "[" * 200_000, "{" * 200_000, '{"a":' * 50_000, "1" * 30_000, '"' + "\x1b" * 30_000 + '"', "x" * (MAX_REPORT_CHARS + 1),
    json.dumps({f"k{i}": [i, None, "v"] for i in range(1500)}), json.dumps([[[[[[1]]]]]] * 3000),
    json.dumps({**GENUINE, "first_drops": [[1.0, "x" * 400, 1]] * 100}),
], ids=["lists", "objects", "keys", "digits", "escapes", "too long", "many keys", "deep lists", "long drops"])
def test_hostile_shapes_cost_at_most_a_constant_times_their_size(data):
    _assert_bounded(data)
    with pytest.raises(ReportRejected):
        parse_report(data)


@pytest.mark.parametrize(("change", "why"), [
    ({"in": "x"}, "'in' missing or not a count"), ({"bad": True}, "'bad' missing or not a count"),
    ({"checked": -1}, "'checked' missing or not a count"), ({"pid": "4242"}, "not a pid"),
    ({"node": "/lidar/\x1b[31mvoxel"}, "not printable"), ({"output": "\x1b]0;owned\x07"}, "not printable"),
    ({"in_by_publisher": {"١٢٣": 1}}, "decimal pids"), ({"in_by_publisher": {"1_000": 1}}, "decimal pids"),
    ({"latency_ms": {"p50": "fast", "n": 1}}, "percentiles"), ({"time": float("inf")}, "not a number"),
    ({"out": 10**400}, "an integer out of range"),
    ({"cpu": {"cpu_s": 1.0, "cpu_ms_per_frame_steady_by_thread": {"main": "1"}}}, "'cpu' not numbers"),
    ({"cpu": {"cpu_ms_per_frame_steady_by_thread": {f"t{i}": 1.0 for i in range(33)}}}, "'cpu' not numbers"),
    ({"cpu": {"cpu_s": {"main": 1.0}}}, "'cpu' not numbers"),
])
def test_a_report_with_a_wrong_type_is_refused_saying_why(change, why):
    with pytest.raises(ReportRejected, match=why.replace("(", r"\(")) as refused:
        parse_report(json.dumps({**GENUINE, **change}))
    assert "\x1b" not in str(refused.value)


def test_the_gate_takes_only_this_run_s_signed_reports_from_the_process_running_the_node():
    key, warnings = new_report_key(), []
    gate = ReportGate(key, "/lidar", ["lidar", "voxel", "preview"], warnings.append)
    pid_of = {"voxel": 4242}.get
    genuine = sign_report(json.dumps(GENUINE), key)
    assert signed_body(genuine, key) == json.dumps(GENUINE)
    assert gate.accept(genuine, pid_of) == ("voxel", GENUINE)
    forged_bad = json.dumps({**json.loads(genuine), "bad": 7, "time": GENUINE["time"] + 1})  # its signature kept
    other_run = sign_report(json.dumps({**GENUINE, "time": GENUINE["time"] + 2}), new_report_key())
    wrong_pid = sign_report(json.dumps({**GENUINE, "pid": 1, "time": GENUINE["time"] + 3}), key)
    stranger = sign_report(json.dumps({**GENUINE, "node": "/lidar/intruder", "time": GENUINE["time"] + 4}), key)
    elsewhere = sign_report(json.dumps({**GENUINE, "node": "/other/voxel", "time": GENUINE["time"] + 5}), key)
    for data in ("not json", "[1, 2]", "", forged_bad, other_run, wrong_pid, stranger, elsewhere, genuine):
        assert gate.accept(data, pid_of) is None  # the last: a replay, no newer than the report taken
    assert sum(gate.ignored.values()) == 9
    assert len(warnings) == len(gate.ignored) == 4  # one line a kind: unsigned, pid, node (twice), replay
    assert all(line.startswith("ignored a message on /lidar/pipeline_stats: ") for line in warnings)
    newer = {**GENUINE, "time": GENUINE["time"] + 9, "checked": 41}
    assert gate.accept(sign_report(json.dumps(newer), key), pid_of) == ("voxel", newer)


def test_a_signed_report_that_does_not_parse_is_a_node_s_bug_not_ignored():
    """Before: a node whose reports gained a field the gate did not know had every later report ignored (one
    warning, invisible under benchmark_multicam), and the run waited for its last reports for ever.  Only the run's
    own nodes hold its key: a signed report that does not parse now ends the run; an unsigned one is ignored."""
    key, warnings = new_report_key(), []
    gate = ReportGate(key, "/lidar", ["lidar", "voxel", "preview"], warnings.append)
    broken = json.dumps({**GENUINE, "cpu": {"cpu_s": "half a second"}})
    assert gate.accept(broken, {"voxel": 4242}.get) is None  # unsigned: anyone's, ignored
    with pytest.raises(OwnReportMalformed, match=r"cannot read \('cpu' not numbers\)"):
        gate.accept(sign_report(broken, key), {"voxel": 4242}.get)


RUNNER = [sys.executable, "-m", "ros2_cuda_ipc_examples.pipelines.runner"]
FORGER = Path(__file__).with_name("report_forger.py")


@pytest.mark.timeout(240)
def test_forgeries_on_the_stats_topic_neither_end_a_run_nor_decide_its_verdict(tmp_path):
    """Before: 'not json', '[1, 2]' and '"in": "x"' each ended ``pipeline lidar`` with a traceback and no summary;
    {"pid": 1} ended it as "another pipeline runs"; voxel's report with "bad": 7 gave FAILED; an ESC in a row name
    reached the terminal; a publisher on the topic before the start ended the run with exit code 1."""
    namespace = "/forged_reports"
    forger = subprocess.Popen([sys.executable, str(FORGER), namespace, "voxel", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert forger.stdout is not None and forger.stdout.readline().strip() == "ready"  # its publisher is up
        run = subprocess.run([*RUNNER, "lidar", "--frames", "40", "--fps", "8", "--size", "256x16", "--memory", "host",
                              "--out", str(tmp_path), "--namespace", namespace], capture_output=True, text=True,
                             timeout=200)
    finally:
        forger.send_signal(signal.SIGTERM)
        forger_out, forger_err = forger.communicate(timeout=30)
    sent = int(forger_out.split()[-1])
    assert run.returncode == 0, run.stdout + run.stderr
    assert "\x1b" not in run.stdout + run.stderr and "Traceback" not in run.stderr, run.stderr
    summary = json.loads((tmp_path / "pipeline-summary.json").read_text())
    assert summary["ok"] and summary["frames_published"] == 40, summary
    assert summary["frames_checked"] == {"voxel": 40, "preview": 40}
    assert summary["nodes"]["voxel"]["bad"] == 0 and summary["exit_codes"] == {"lidar": 0, "voxel": 0, "preview": 0}
    ignored = summary["reports_ignored"]
    assert sent > 0 and 0 < sum(ignored.values()) <= sent, (sent, ignored, forger_err)
    said = [line for line in run.stderr.splitlines() if line.startswith("ignored a message on ")]
    assert len(said) == len(ignored), run.stderr  # one line a kind, however many came


@pytest.mark.timeout(240)
@pytest.mark.parametrize("compose", [False, True])
def test_a_flood_of_report_requests_on_the_old_topic_finds_no_subscriber_and_ctrl_c_still_gets_fresh_reports(
        tmp_path, compose):
    """Before: the runner asked for the last reports on the DDS topic ``pipeline_report_request``, which any
    participant could flood (51,850 requests: lidar 57.4 ms of CPU a frame).  Now it asks over a pipe only it holds:
    the topic has no subscriber, and after Ctrl-C every node's kept report is fresh, made after the stop (composed:
    the three nodes of one process, each asked by name).  Whether a kept report is the one asked for or the node's
    periodic one that came first is not asserted: either is fresh, and which comes first is timing."""
    namespace = f"/flooded_requests_{int(compose)}"
    forger = subprocess.Popen([sys.executable, str(FORGER), namespace, "voxel", "0", "2000"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "FORGERIES": "-"})
    runner = None
    try:
        assert forger.stdout is not None and forger.stdout.readline().strip() == "ready"
        runner = subprocess.Popen([*RUNNER, "lidar", "--fps", "8", "--size", "256x16", "--memory", "host", "--out",
                                   str(tmp_path), "--namespace", namespace, *(["--compose"] if compose else [])],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert forger.stdout.readline().strip() == "flooding"  # it read voxel's report: the nodes are up
        time.sleep(4.0)  # rounds of requests while frames flow
        stopped_at = time.time()
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=120)
    finally:
        if runner is not None:
            runner.kill()
        forger.send_signal(signal.SIGTERM)
        forger_out, forger_err = forger.communicate(timeout=30)
    assert runner.returncode == 0 and "Traceback" not in err, out + err
    assert "request subscribers 0" in forger_out.splitlines(), forger_out + forger_err
    assert int(forger_out.split()[-1]) >= 2000, forger_out
    summary = json.loads((tmp_path / "pipeline-summary.json").read_text())
    assert summary["interrupted"] and summary["frames_published"] > 0, summary
    nodes = summary["nodes"]
    assert all(nodes[name]["time"] > stopped_at for name in ("lidar", "voxel", "preview")), (stopped_at, nodes)
    assert summary["frames_checked"]["voxel"] <= nodes["lidar"]["out"], summary  # downstream asked first
    print(f"lidar CPU {nodes['lidar']['cpu']} under {forger_out.split()[-1]} requests")  # shown with -s
