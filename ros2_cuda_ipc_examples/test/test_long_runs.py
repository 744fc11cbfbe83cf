"""The pieces long runs rest on, without pipeline processes: warm-up apart, CPU counters, GC pauses and a Ctrl-C
during one, restarted nodes' counters, the restart policy, the multi-camera figures."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ros2_cuda_ipc_examples.bench.multicam import multicam_row
from ros2_cuda_ipc_examples.nodes.frame_stats import FrameTrace, LatencySamples, ProcessCpu, gc_pauses, tail_breakdown
from ros2_cuda_ipc_examples.pipelines.live_table import StatsTable
from ros2_cuda_ipc_examples.pipelines.reports import parse_report
from ros2_cuda_ipc_examples.pipelines.restarts import Restarts
from ros2_cuda_ipc_examples.pipelines.runner import _collect_last_reports


def _report(name: str, pid: int, **counts: int) -> str:
    base = {"in": 0, "out": 0, "checked": 0, "bad": 0, "stale": 0, "lost": 0, "gone": 0}
    return json.dumps({"node": f"/ns/{name}", "pid": pid, "time": 1.0,
                       "latency_ms": {"p50": None, "p99": None, "n": 0},
                       "latency_ms_total": {"p50": None, "p99": None, "n": 0}, **base, **counts})


class _Table(StatsTable):
    """The live table fed as the runner feeds it: each message parsed and checked first."""

    def add_message(self, data: str) -> None:
        report = parse_report(data)
        self.add(report["node"].rsplit("/", 1)[-1], report)


def test_warm_up_frames_are_kept_apart_from_the_steady_state():
    samples = LatencySamples(warmup_frames=3)
    for value in (100.0, 50.0, 20.0, 2.0, 2.0, 3.0):
        samples.add(value)
    report = samples.report()
    assert report["latency_ms_warmup"]["n"] == 3 and report["latency_ms_warmup"]["p50"] == 50.0
    assert report["latency_ms_steady"]["n"] == 3 and report["latency_ms_steady"]["p99"] < 3.1
    assert report["latency_ms_total"]["n"] == 6 and report["latency_ms"]["n"] == 6
    assert samples.report()["latency_ms"]["n"] == 0  # the window starts again after each report


def test_cpu_per_frame_counts_this_process_s_work_since_the_steady_state_began():
    cpu = ProcessCpu()
    cpu.steady_from_now(frames=10)
    sum(i * i for i in range(300_000))  # CPU the process spends
    report = cpu.report(frames=20)
    assert report["cpu_ms_per_frame_steady"] > 0 and report["cpu_ms_per_frame"] > 0 and report["cpu_percent"] > 0
    assert cpu.report(frames=20)["cpu_ms_per_frame"] is None  # no frame in the period


def test_the_steady_cpu_split_by_thread_names_the_main_thread_and_accounts_for_ended_ones():
    """Which threads a node's CPU a frame goes to: ``main`` (the executor and its callbacks), the others by kind,
    and ``ended`` for threads gone since the steady state began; together they are the process's CPU."""
    import threading

    cpu = ProcessCpu()
    cpu.steady_from_now(frames=0)
    burner = threading.Thread(target=lambda: sum(i * i for i in range(600_000)))
    burner.start()
    burner.join()
    sum(i * i for i in range(300_000))
    report = cpu.report(frames=10)
    split = report["cpu_ms_per_frame_steady_by_thread"]
    assert split["ended"] > split["main"] > 0, split  # the ended thread burned twice what main did
    assert abs(sum(split.values()) - report["cpu_ms_per_frame_steady"]) <= 0.05 * report["cpu_ms_per_frame_steady"]
    assert list(split.values()) == sorted(split.values(), reverse=True) and len(split) <= 16


def test_gc_pauses_are_counted():
    import gc

    before = gc_pauses().count
    gc.collect()
    assert gc_pauses().count > before and gc_pauses().report()["longest_ms"] >= 0


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_the_collector_runs_ends_the_node_cleanly(stop):
    """Before: a SIGINT handled inside the GC-pause callback was printed as "Exception ignored in <_GcPauses>" and
    lost (the H200's test_each_component_as_its_own_process_stops_on_sigint).  A node under run_nodes notes the
    signal instead of raising it; here, five times each, one collecting at nearly every allocation stops cleanly."""
    peer = Path(__file__).with_name("gc_interrupt_peer.py")
    for _ in range(5):
        process = subprocess.Popen([sys.executable, str(peer)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert process.stdout.readline().strip() == "ready"
            process.send_signal(stop)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert "Exception ignored" not in err and "Traceback" not in err, err
        assert process.returncode == 0 and "stopped after" in out, out + err


def test_a_restarted_node_s_counters_add_to_its_earlier_lives():
    table = _Table(["camera", "encoder"])
    table.add_message(_report("encoder", 100, checked=40, bad=0, **{"in": 41}))
    table.restarted("encoder")
    table.add_message(_report("encoder", 200, checked=5, **{"in": 5}))
    latest = table.latest["encoder"]
    assert (latest["checked"], latest["in"], latest["checked_this_life"], latest["restarts"]) == (45, 46, 5, 1)
    assert table.rows()[1][-2] == "1"  # the restarts column (before what the node sends)
    table.add_message(_report("encoder", 200, checked=9, **{"in": 9}))
    assert table.latest["encoder"]["checked"] == 49  # the earlier life is added once, not per report


class _FlowingPipeline:
    """A spinner for ``_collect_last_reports``: frames keep flowing (each node's count grows by one a spin), a node
    asked for a report sends it at the next spin, and inference's once-a-second report arrives at every spin."""

    def __init__(self, table: _Table) -> None:
        self.table, self.clock, self.frames, self.asked, self.requests = table, 0.0, 30, [], []

    def ask(self, name: str, node: str) -> None:
        self.asked.append(name)
        self.requests.append(node)

    def _send(self, name: str) -> None:
        # at one instant inference has checked all preprocess sent: a later report of inference shows more
        counts = {"camera": {"out": self.frames}, "preprocess": {"in": self.frames - 1, "out": self.frames - 1},
                  "inference": {"in": self.frames - 1, "checked": self.frames - 1}}[name]
        self.clock = max(self.clock + 1e-6, time.time())  # the runner's reports carry the nodes' wall clocks
        self.table.add_message(json.dumps({**json.loads(_report(name, 1, **counts)), "time": self.clock}))

    def spin_once(self, timeout_sec: float) -> None:
        self.frames += 1
        while self.asked:
            self._send(self.asked.pop())
        self._send("inference")  # its periodic report, not asked for


def test_the_last_reports_after_ctrl_c_keep_each_count_at_least_the_next_node_s():
    """Before: inference's periodic report came after preprocess's last one had been taken and replaced
    inference's last, so the summary said inference checked 37 of the 36 preprocess sent (the GPU suite's
    ``test_ctrl_c_counts_every_checked_frame_as_published...[events-composed]``)."""
    table = _Table(["camera", "preprocess", "inference"])
    pipeline = _FlowingPipeline(table)
    for name in table.order:
        pipeline._send(name)
    _collect_last_reports(pipeline, table, pipeline.ask, seconds_each=1.0)
    latest = table.latest
    assert latest["camera"]["time"] > latest["preprocess"]["time"] > latest["inference"]["time"]
    assert latest["camera"]["out"] >= latest["preprocess"]["in"]
    assert latest["preprocess"]["out"] >= latest["inference"]["checked"]


def test_a_node_that_has_not_reported_yet_is_asked_for_its_report_after_ctrl_c():
    """Before: a fresh clone's loaded run stopped 4.3 s in, while the camera's and preprocess's first reports were
    still in DDS discovery; they were never asked, and the summary said the pipeline published 0 frames."""
    table = _Table(["camera", "preprocess", "inference"])
    pipeline = _FlowingPipeline(table)
    pipeline._send("inference")  # the only node the monitor has heard from so far
    _collect_last_reports(pipeline, table, pipeline.ask, seconds_each=1.0)
    assert set(table.latest) == {"camera", "preprocess", "inference"}
    assert pipeline.requests.count("*") >= 2  # camera and preprocess, by their process (no name known yet)
    assert table.latest["camera"]["out"] >= table.latest["preprocess"]["in"]


class _SilentPipeline(_FlowingPipeline):
    """Nodes that never answer (stopped, or never came up)."""

    def spin_once(self, timeout_sec: float) -> None:
        self.asked.clear()
        time.sleep(timeout_sec)


def test_nodes_that_never_report_share_one_wait_after_ctrl_c():
    """Asked one after another, each of multicam's 16 nodes that never came up would cost its own 3 s."""
    table = _Table([f"camera{i}" for i in range(8)])
    pipeline = _SilentPipeline(table)
    started = time.monotonic()
    _collect_last_reports(pipeline, table, pipeline.ask, seconds_each=0.5)
    assert time.monotonic() - started < 0.5 * 3  # one shared wait, not eight (4 s)
    assert table.latest == {}
    assert pipeline.requests[:8] == ["*"] * 8  # each asked once at the start


def test_a_killed_source_s_unreported_frames_count_as_published_once_its_readers_report_them():
    """Before: the pipeline soak said '221 frames published; checked: ... encoder 230': a camera SIGKILLed a second
    after its last report had sent frames the encoder checked, and its count ended at that report."""
    table = _Table(["camera", "encoder"])
    table.add_message(_report("camera", 100, out=20))  # its last report: then it sends 5 more and is killed
    table.add_message(json.dumps({**json.loads(_report("encoder", 300, checked=20, **{"in": 20})),
                          "in_by_publisher": {"100": 20}}))
    table.restarted("camera")
    table.add_message(_report("camera", 200, out=3))  # its next life, before the encoder's next report
    assert table.latest["camera"]["out"] == 20 + 3
    table.add_message(json.dumps({**json.loads(_report("encoder", 300, checked=27, **{"in": 28})),
                          "in_by_publisher": {"100": 25, "200": 3}}))
    table.add_message(_report("camera", 200, out=4))
    assert table.latest["camera"]["out"] == 25 + 4 >= table.latest["encoder"]["checked"]
    assert table.latest["camera"]["counts_this_life"]["out"] == 4


def test_the_whole_run_s_table_shows_its_rates_and_latency_not_the_last_period_s():
    """Before: the (done) table showed the last period, after the source had stopped: every rate 0.0, every p50 '-'."""
    table = _Table(["camera", "encoder"])
    for seconds in (1.0, 2.0):  # two reports each, the second after the camera sent its last frame
        camera = json.loads(_report("camera", 1, out=40))
        camera.update(time=seconds, source=True, elapsed_s=4.0)
        table.add_message(json.dumps(camera))
        encoder = json.loads(_report("encoder", 2, checked=38, out=40, **{"in": 40}))
        encoder.update(time=seconds, latency_ms_total={"p50": 12.0, "p99": 30.0, "n": 38},
                       cpu={"cpu_ms_per_frame": None, "cpu_percent": 0.0, "cpu_ms_per_frame_steady": 2.5})
        table.add_message(json.dumps(encoder))
    assert table.rows()[1][1:5] == ["0.0", "0.0", "-", "-"]  # the last period: nothing moved
    camera_row, encoder_row = table.rows(totals=True)
    assert camera_row[2] == "10.0" and encoder_row[1:5] == ["10.0", "10.0", "12.0", "30.0"]  # 40 in 4.0 s
    assert encoder_row[6:8] == ["2.5", "-"]  # CPU a frame in the steady state; no share of a period
    assert table.render(totals=True).endswith("(the whole run: in/s and out/s over the camera's 4.0 s of sending; "
                                              "p50 and p99 over every frame; cpu ms/f in the steady state)")


def test_the_readme_s_sample_table_is_the_one_the_runner_prints_at_the_end():
    """Before: the README's sample had other columns and real rates, where the runner's (done) table said 0.0 and '-'."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()
    title = next(i for i, line in enumerate(readme) if line.startswith("fanout · ") and line.endswith("(done)"))
    table = _Table(["camera"])
    assert readme[title + 1] == table.render(totals=True).splitlines()[0]  # the header
    assert readme[title + 7].startswith("(the whole run: in/s and out/s over the camera's ")
    rates = [float(line.split()[1]) for line in readme[title + 3:title + 7]]
    assert all(rate > 0 for rate in rates), readme[title + 2:title + 7]


def test_nodes_of_one_process_are_named_as_sharing_its_cpu():
    table = _Table(["camera", "encoder", "preview"])
    for name in ("camera", "encoder"):
        table.add_message(_report(name, 7))
    table.add_message(_report("preview", 8))
    assert table.shared_processes() == [["camera", "encoder"]]
    assert "(cpu of camera, encoder: their one process's)" in table.render()


@pytest.mark.parametrize(("policy", "code", "restarted"), [
    ("no", 1, False), ("on-failure", -9, True), ("on-failure", 0, False), ("always", 0, True), ("always", -9, True)])
def test_the_restart_policy_decides_who_comes_back(policy, code, restarted):
    restarts = Restarts(policy, start=lambda name: name, on_restart=lambda name: None)
    assert restarts.handles("encoder", code, started=0.0) is restarted
    assert restarts.waiting("encoder") is restarted


def test_an_unknown_restart_policy_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        Restarts("sometimes", start=lambda name: name, on_restart=lambda name: None)


def test_multicam_figures_count_each_process_once():
    def node(pid: int, source: bool, cpu: float, p50: float = 0.0, p99: float = 0.0) -> dict:
        return {"pid": pid, "source": source, "bad": 0, "cpu": {"cpu_ms_per_frame_steady": cpu},
                "latency_ms_steady": {"p50": p50, "p99": p99, "n": 10}}

    summary = {"frames_published": 60, "frames_checked": {"r0": 30, "r1": 30}, "ok": True,
               "nodes": {"c0": node(1, True, 2.0), "r0": node(2, False, 1.0, 3.0, 9.0),
                         "r1": node(3, False, 3.0, 5.0, 12.0)}}
    row = multicam_row(summary, fps=30.0)
    assert row["camera_cpu_ms_per_frame"] == 2.0 and row["reader_cpu_ms_per_frame"] == 2.0
    assert row["cores"] == pytest.approx((2.0 + 1.0 + 3.0) * 30 / 1000) and row["processes"] == 3
    assert (row["latency_p50_ms"], row["latency_p99_ms"], row["frames_checked"]) == (4.0, 12.0, 60)
    composed = {**summary, "nodes": {name: {**report, "pid": 1} for name, report in summary["nodes"].items()}}
    assert multicam_row(composed, fps=30.0)["processes"] == 1


def test_a_trace_says_where_the_slowest_frames_spent_their_time(tmp_path):
    from ros2_cuda_ipc_examples.nodes.frame_stats import FrameTrace, tail_breakdown

    trace = FrameTrace(tmp_path / "trace" / "node.jsonl")
    for frame in range(200):
        trace.start(waited_ms=50.0 if frame == 7 else 1.0)  # one frame waited long for its callback
        for _ in range(3):  # read, work, release
            trace.mark()
        trace.finish(latency_ms=52.0 if frame == 7 else 3.0)
    trace.close()
    tail = tail_breakdown(tmp_path / "trace" / "node.jsonl")
    assert tail["frames"] == 200 and tail["tail_frames"] == 2  # the 99th percentile of 200 frames
    assert tail["tail"]["wake_ms"] > 20 and tail["median_frame"]["wake_ms"] == 1.0
    assert set(tail["tail"]) == {"latency_ms", "wake_ms", "read_ms", "work_ms", "release_ms", "gc_ms"}


def test_frames_a_restart_lost_count_as_lost():
    """Before: ``pipeline fanout --restart on-failure`` with the encoder killed showed lost 0, though the camera's
    frames of the encoder's dead seconds never reached it.  The gap between one life's last frame number and the
    next life's first is lost; a restarted camera, numbering from 0 again, adds no gap."""
    table = _Table(["camera", "encoder"])
    first_life = json.loads(_report("encoder", 100, checked=101, lost=2, **{"in": 101}))
    table.add_message(json.dumps({**first_life, "seq_first": 0, "seq_last": 102}))
    table.restarted("encoder")
    second_life = json.loads(_report("encoder", 200, checked=10, **{"in": 10}))
    table.add_message(json.dumps({**second_life, "seq_first": None, "seq_last": None}))
    assert table.latest["encoder"]["lost"] == 2  # no frame yet in this life: no gap known
    table.add_message(json.dumps({**second_life, "seq_first": 150, "seq_last": 159, "time": 2.0}))
    assert table.latest["encoder"]["lost"] == 2 + 47  # frames 103 to 149
    table.restarted("encoder")
    third_life = json.loads(_report("encoder", 300, checked=5, **{"in": 5}))
    table.add_message(json.dumps({**third_life, "seq_first": 3, "seq_last": 7}))  # a new camera's numbers
    assert table.latest["encoder"]["lost"] == 2 + 47


def test_a_restarted_node_s_trace_keeps_its_earlier_lives_lines(tmp_path):
    """Before: a restarted node opened its trace with "w": after an encoder kill, trace/encoder.jsonl held only the
    second life's 198 lines.  Now each life appends, a line at a time, and a line torn by a SIGKILL is skipped."""
    path = tmp_path / "trace" / "encoder.jsonl"
    for life in range(2):
        trace = FrameTrace(path)
        for frame in range(50):
            trace.start(waited_ms=1.0)
            trace.mark()
            trace.finish(latency_ms=float(frame + 100 * life))
        if life == 0:  # killed mid-line: what reached the file stops inside a record
            trace._out.write('{"latency_ms": 12')
            trace._out.flush()
        else:
            trace.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 101 and lines[50] == '{"latency_ms": 12'  # both lives' 50 lines and the torn one apart
    assert tail_breakdown(path)["frames"] == 100
