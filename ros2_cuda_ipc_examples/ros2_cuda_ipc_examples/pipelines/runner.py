"""Run an example pipeline as separate processes (default) or composed in one container, with a live table.

    pipeline fanout --seconds 10 --size 1080p --memory auto
    pipeline fanout --compose --frames 300 --size 4k
    pipeline lidar --seconds 10 --size 2048x128          # columns x rings
    pipeline fanout --seconds 10 --record fanout-bag     # and the camera's frames into a rosbag2 bag
    ros2 run ros2_cuda_ipc_examples pipeline fanout --seconds 10

It prints a table once a second (per node: frames in and out per second, latency from the
camera's stamp p50 / p99, frames checked, bad, stale drops, lost, leases held, same-process
reads), stops after ``--seconds`` / ``--frames`` or on Ctrl-C (exit code 0), and writes
``pipeline-summary.json`` and the preview node's ``preview.png`` to ``--out``. If a node's
process fails, it says which and shows that node's last log lines at once; a node that does not
end within 15 s of the stop is asked where its threads are (SIGUSR1), killed, and shown the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any

from ros2_cuda_ipc_core import (
    CUDA_WAIT_ENVIRONMENT,
    EXECUTOR_ENVIRONMENT,
    new_executor,
    run_tool,
    stop_signals_noted,
    tool_parser,
)
from ros2_cuda_ipc_tools import PARENT_PID_VARIABLE, STACKS_SIGNAL, ComponentSpec

from ..nodes.frame_stats import tail_breakdown
from ..nodes.pipeline_node import STATS_TOPIC
from ..nodes.report_signature import REPORT_KEY_VARIABLE, new_report_key
from .arguments import add_run_arguments, options_from
from .definitions import PIPELINES, Pipeline, PipelineOptions
from .live_table import StatsTable
from .namespace_claim import NamespaceTaken, claim_namespace
from .reports import OwnReportMalformed, ReportGate
from .request_pipe import RequestPipe
from .restarts import RESTART_POLICIES, Restarts
from .stacks import native_stacks

__all__ = ["RECORDED_TOPICS", "PipelineConflict", "PipelineFailed", "Watcher", "add_record_argument", "failure_reasons",
           "main", "print_outcome", "print_tail_frames", "record_command", "report_failure", "run_pipeline",
           "tail_frames", "traced", "write_summary"]

STARTUP_TIMEOUT = 60.0  # seconds for every node to report once
FIRST_FRAME_TIMEOUT = 60.0  # seconds after that for the source's first frame
DRAIN_REPORTS = 2  # after the source is done: reports with no change before the pipeline counts as drained
STOP_TIMEOUT = 15.0  # seconds a node has to end after SIGINT before it is asked for its stacks and killed
#: Called by the runner's loop with the live table and each node's pid: see :func:`run_pipeline`.
Watcher = Callable[[StatsTable, dict[str, int]], None]


class PipelineFailed(RuntimeError):
    """A node's process ended early or never reported; the message names it and shows its last log lines.

    ``reason`` is the message's first line (what a run's last line says); ``summary`` what the nodes had reported,
    marked failed, once the run is stopped (None before)."""

    summary: dict[str, Any] | None = None

    @property
    def reason(self) -> str:
        return str(self).split("\n", 1)[0]


class PipelineConflict(PipelineFailed):
    """Another pipeline (or another publisher of its topics) runs in the namespace: its reports would mix with ours."""


@dataclass
class _Child:
    name: str
    process: subprocess.Popen
    log: Path
    started: float
    requests: RequestPipe  # asks its nodes for a report now
    killed: bool = False  # still running STOP_TIMEOUT s after SIGINT
    stacks: Path | None = None  # then: where its threads waited below Python

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").rstrip().splitlines()
        except OSError:
            return "(no log)"
        return "\n".join("    " + line for line in text[-lines:]) or "    (empty log)"


def _param(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _process_command(spec: ComponentSpec) -> list[str]:
    args = ["--ros-args", "-r", f"__node:={spec.name}", "-r", f"__ns:={spec.namespace}"]
    args += [arg for key, value in spec.parameters.items() for arg in ("-p", f"{key}:={_param(value)}")]
    args += [arg for source, target in spec.remappings.items() for arg in ("-r", f"{source}:={target}")]
    return [sys.executable, "-m", "ros2_cuda_ipc_tools.components.run_component", spec.plugin, *args]


def _container_command(pipeline: Pipeline, executor: str, namespace: str, restart_components: bool = False) -> list[str]:
    args = ["--restart-components"] if restart_components and executor == "single" else []
    for spec in pipeline.components:
        args += ["--load", spec.plugin, "--name", spec.name or "", "--namespace", spec.namespace or namespace]
        args += [arg for key, value in spec.parameters.items() for arg in ("--param", f"{key}:={_param(value)}")]
        args += [arg for source, target in spec.remappings.items() for arg in ("--remap", f"{source}:={target}")]
    return [sys.executable, "-m", "ros2_cuda_ipc_tools.components.container", *args, "--executor", executor,
            "--ros-args", "-r", f"__node:={pipeline.name}_container", "-r", f"__ns:={namespace}"]


def _start(name: str, command: list[str], log_dir: Path, key: bytes, mode: str = "w", *,
           executor: str = "single", cuda_wait: str = "auto") -> _Child:
    """Start ``command`` as ``name``, its output into its log; ``key`` signs its nodes' reports (the run's); a
    fresh :class:`RequestPipe` (every start, restarts too) is how the runner asks its nodes for reports; a node
    process spins on ``executor`` (a container is told with ``--executor`` too) and waits for the GPU as ``cuda_wait``
    says."""
    log = log_dir / f"{name}.log"
    requests = RequestPipe()
    try:
        with log.open(mode) as out:
            if mode == "a":
                out.write(f"--- {name} restarted by the runner ---\n")
                out.flush()
            env = {**os.environ, PARENT_PID_VARIABLE: str(os.getpid()), REPORT_KEY_VARIABLE: key.hex(),
                   EXECUTOR_ENVIRONMENT: executor, CUDA_WAIT_ENVIRONMENT: cuda_wait, **requests.environment()}
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, env=env, pass_fds=(requests.child_end,))
    except BaseException:
        requests.close()
        raise
    requests.started()
    return _Child(name, process, log, time.monotonic(), requests)


def _stop(children: list[_Child], timeout: float = STOP_TIMEOUT) -> dict[str, int]:
    """SIGINT the children one at a time, in pipeline order (the source first), each once the one before has
    ended; one still running ``timeout`` s after its SIGINT is asked for its stacks, then SIGKILLed.

    One at a time because of a deadlock in Fast DDS (docs/decisions.md, session 4): a process deleting its
    participant can hang for good when another participant leaves at that moment, its removal arriving while
    the deletion waits for the discovery listener.  Stopped together, every node sees the others leave while
    it deletes its own; stopped in turn, each has seen the one before go before it starts deleting.
    """
    codes = {}
    for child in children:
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGINT)
        try:
            codes[child.name] = child.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _ask_for_stacks(child)
            _append_native_stacks(child)
            child.process.kill()
            child.killed = True
            codes[child.name] = child.process.wait()
    return codes


def _ask_for_stacks(child: _Child, timeout: float = 3.0) -> None:
    """Have a child that did not stop write where each of its threads is into its log (see parent_watch)."""
    size = child.log.stat().st_size if child.log.exists() else 0
    child.process.send_signal(STACKS_SIGNAL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.process.poll() is None:
        with child.log.open("rb") as log:
            log.seek(size)
            if b"most recent call first" in log.read():
                time.sleep(0.2)  # the other threads' stacks follow the first
                return
        time.sleep(0.05)


def _append_native_stacks(child: _Child) -> None:
    """Beside the Python stacks, where each thread waits in C (the DDS library's threads have no Python frame):
    in ``<node>.stacks.txt`` next to its log, long as gdb's backtraces are."""
    child.stacks = child.log.with_suffix(".stacks.txt")
    child.stacks.write_text(native_stacks(child.process.pid) + "\n")


class _Screen:
    """Prints the table once a second in place on a terminal; elsewhere (a log, a pipe) only the last one, at the
    end (:meth:`close`): a log of a table a second is hundreds of lines nobody reads."""

    def __init__(self, stream: IO[str] | None, title: str) -> None:
        self.stream, self.title = stream, title
        self._lines = 0
        self._in_place = stream is not None and stream.isatty()
        self._last: str | None = None

    def show(self, text: str) -> None:
        if self.stream is None:
            return
        if not self._in_place:
            self._last = text
            return
        if self._lines:
            self.stream.write(f"\x1b[{self._lines}F\x1b[J")
        self.stream.write(text + "\n")
        self.stream.flush()
        self._lines = text.count("\n") + 1

    def note(self, line: str) -> None:
        """One line said during the run: above the table on a terminal (drawn again below it), else on stderr."""
        if not self._in_place or self.stream is None:
            print(line, file=sys.stderr, flush=True)
            return
        self.stream.write(line + "\n")
        self.stream.flush()
        self._lines = 0

    def close(self) -> None:
        """Print the last table where it was held back."""
        if self.stream is not None and self._last is not None:
            self.stream.write(self._last + "\n")
            self.stream.flush()
            self._last = None


#: What ``--record`` stores, by pipeline: its source's output topic (relative to the pipeline's namespace).
RECORDED_TOPICS = {"fanout": ["image"], "lidar": ["points"]}


def add_record_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", type=Path, default=None, metavar="BAG",
                        help="also record the source's frames into the new rosbag2 bag BAG (bag_record, its own process)")


def record_command(pipeline: Pipeline, namespace: str, bag: Path) -> list[str]:
    """``bag_record`` of the pipeline's source topic into ``bag``: one more child, stopped with the others."""
    topics = [f"{namespace.rstrip('/')}/{topic}" for topic in RECORDED_TOPICS[pipeline.name]]
    return [sys.executable, "-m", "ros2_cuda_ipc_tools.bag.record", "-o", str(bag), *topics, "--quiet"]


def _waiting_for_recorder(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` with its source waiting for one more subscriber: the recorder, the slowest to start."""
    source, *others = pipeline.components
    parameters = {**source.parameters, "wait_for_subscribers": int(source.parameters.get("wait_for_subscribers", 0)) + 1}
    return dataclasses.replace(pipeline, components=[dataclasses.replace(source, parameters=parameters), *others])


def run_pipeline(pipeline: Pipeline, options: PipelineOptions, *, compose: bool = False, executor: str = "single",
                 stream: IO[str] | None = sys.stdout, title: str = "", record: Path | None = None,
                 restart: str = "no", watcher: Watcher | None = None) -> dict[str, Any]:
    """Start ``pipeline``, show the live table on ``stream`` until it is done (or Ctrl-C), stop it; return its summary.

    ``record``: a bag that ``bag_record`` writes the source's frames into meanwhile.

    Raises PipelineFailed as soon as a node's process ends early (unless ``restart="on-failure"`` starts it
    again: see :mod:`.restarts`; composed, the container also restarts a component that raises) or a node
    never reports. ``watcher(table, pids)`` is called about ten times
    a second with the reports so far and each node's process id (the soak kills and samples through it);
    what it raises ends the run, after the nodes are stopped.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from std_msgs.msg import String

    log_dir = options.out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    _remove_earlier_runs_files(pipeline, options.out_dir)
    if record is not None:
        pipeline = _waiting_for_recorder(pipeline)
    table = StatsTable(pipeline.node_names)
    container = f"{pipeline.name}_container" if compose else None
    if container is not None:
        commands = {container: _container_command(pipeline, executor, options.namespace, restart != "no")}
    else:
        commands = {spec.name or spec.plugin: _process_command(spec) for spec in pipeline.components}
    if record is not None:
        commands["bag_record"] = record_command(pipeline, options.namespace, record)
    children: list[_Child] = []
    key = new_report_key()
    restarts = Restarts(restart, lambda name: _start(name, commands[name], log_dir, key, "a", executor=executor,
                                                      cuda_wait=options.cuda_wait),
                        table.restarted)
    started = time.monotonic()
    interrupted = False
    codes: dict[str, int] = {}
    screen = _Screen(stream, title)
    gate = ReportGate(key, options.namespace, pipeline.node_names, screen.note)
    claim = None
    _init_keeping_ctrl_c(rclpy)
    spinner = new_executor(SingleThreadedExecutor)
    try:  # from here on every exit stops what was started and shuts rclpy down: the next run in this process starts clean
        try:
            claim = claim_namespace(options.namespace)
        except NamespaceTaken as taken:
            raise PipelineConflict(f"{taken}: its frames and reports would mix with this run's; stop it or pass "
                                   "another --namespace") from None
        monitor = rclpy.create_node("pipeline_monitor", namespace=options.namespace)
        def on_stats(msg: String) -> None:
            try:
                accepted = gate.accept(msg.data, lambda name: _pid_running(children, name, container))
            except OwnReportMalformed as bug:  # its last reports would never count: the run would wait forever
                raise PipelineFailed(f"{bug}; logs in {log_dir}") from None
            if accepted is not None:
                table.add(*accepted)

        monitor.create_subscription(String, STATS_TOPIC, on_stats, 50)
        spinner.add_node(monitor)
        _refuse_a_running_pipeline(spinner, monitor, pipeline, options.namespace, screen.note)
        for name, command in commands.items():
            children.append(_start(name, command, log_dir, key, executor=executor, cuda_wait=options.cuda_wait))
        started = time.monotonic()
        _watch(spinner, table, children, screen, started, restarts, watcher)
    except (KeyboardInterrupt, ExternalShutdownException):  # Ctrl-C: stop the nodes, keep what they reported
        interrupted = True
        with stop_signals_noted():  # a second Ctrl-C here must not cost the run its summary
            _collect_last_reports(spinner, table, lambda name, node: _ask_for_report(children, container, name, node))
        screen.show(f"{screen.title}  t={time.monotonic() - started:.0f}s (stopped)\n{table.render(totals=True)}")
    except PipelineFailed as early:  # stopped below; the summary says what was reported, marked failed
        early.summary = {"failure": early.reason}
        raise
    finally:
        with stop_signals_noted():  # nor a Ctrl-C while the nodes are stopped (each stop is bounded: STOP_TIMEOUT)
            codes = _stop(children)
            for child in children:
                child.requests.close()
            spinner.shutdown(timeout_sec=1.0)
            for node in spinner.get_nodes():
                node.destroy_node()
            rclpy.try_shutdown()
            if claim is not None:
                claim.close()
            screen.close()
            _fill_failed_summary(sys.exc_info()[1], pipeline, options, table, compose, started, codes, gate.ignored)
    failed = {name: code for name, code in codes.items() if code != 0 and not restarts.waiting(name)}
    if failed and not interrupted:
        failure = _stop_failure(children, failed)
        failure.summary = {**_summary(pipeline, options, table, compose, time.monotonic() - started, False, codes,
                                      gate.ignored),
                           "ok": False, "failure": failure.reason}
        raise failure
    return _summary(pipeline, options, table, compose, time.monotonic() - started, interrupted, codes, gate.ignored)


def _stop_failure(children: list[_Child], failed: dict[str, int]) -> PipelineFailed:
    """What to say of nodes that did not end cleanly when asked to stop."""
    name = next(iter(failed))
    child = next(c for c in children if c.name == name)
    others = ", ".join(f"{other} {code}" for other, code in failed.items() if other != name)
    also = f" (exit codes of the others that failed: {others})" if others else ""
    if child.killed:
        return PipelineFailed(f"{name} (pid {child.process.pid}) was still running {STOP_TIMEOUT:.0f} s after SIGINT "
                              f"and was killed{also}; where its threads were, and its log ({child.log}), end:\n"
                              f"{child.tail(80)}\nits threads below Python: {child.stacks}")
    return PipelineFailed(f"{name} exited with code {failed[name]} when asked to stop{also}:\n{child.tail()}")


def traced(pipeline: Pipeline, out_dir: Path) -> Pipeline:
    """``pipeline`` with every node tracing each frame it reads into ``out_dir/trace/<node>.jsonl``."""
    return replace(pipeline, components=[
        replace(spec, parameters={**spec.parameters, "trace_path": str(_trace_path(out_dir, spec.name or ""))})
        for spec in pipeline.components])


def _trace_path(out_dir: Path, name: str) -> Path:
    return out_dir.resolve() / "trace" / f"{name}.jsonl"


def tail_frames(pipeline: Pipeline, out_dir: Path) -> dict[str, Any]:
    """Per traced node: where its slowest 1% of frames spent their time, beside its median frame."""
    paths = {name: _trace_path(out_dir, name) for name in pipeline.node_names}
    return {name: tail_breakdown(path) for name, path in paths.items() if path.exists() and path.stat().st_size}


def print_tail_frames(tails: dict[str, Any], stream: IO[str] = sys.stdout) -> None:
    for name, tail in tails.items():
        if not tail.get("tail_frames"):
            continue
        slow, typical = tail["tail"], tail["median_frame"]
        steps = ", ".join(f"{key[:-3]} {slow[key]:.1f} (median {typical[key]:.1f})"
                          for key in ("wake_ms", "read_ms", "work_ms", "release_ms", "gc_ms"))
        stream.write(f"trace: {name:<10} {tail['tail_frames']} frames >= {tail['tail_from_ms']:.1f} ms: {steps} ms\n")


def _refuse_a_running_pipeline(spinner: Any, monitor: Any, pipeline: Pipeline, namespace: str,
                               warn: Callable[[str], None], seconds: float = 1.0) -> None:
    """Look at the ROS graph for ``seconds`` (discovery): a node of this pipeline's names already in ``namespace``
    is another run there, and a :class:`PipelineConflict`.  A publisher of the stats topic alone proves nothing
    (any participant can make one): ``warn`` says so, and the reports it sends are ignored (:class:`ReportGate`)."""
    deadline = time.monotonic() + seconds
    stats_topic = f"{namespace.rstrip('/')}/{STATS_TOPIC}"
    ours = {f"{namespace.rstrip('/')}/{name}" for name in pipeline.node_names}
    while time.monotonic() < deadline:
        spinner.spin_once(timeout_sec=0.1)
        present = {f"{ns.rstrip('/')}/{name}" for name, ns in monitor.get_node_names_and_namespaces()}
        taken = sorted(ours & present)
        if taken:
            raise PipelineConflict(f"another pipeline runs in {namespace} ({', '.join(taken)}): its frames and reports "
                                   "would mix with this run's; stop it or pass another --namespace")
    publishers = monitor.count_publishers(stats_topic)
    if publishers:
        warn(f"{stats_topic} has {publishers} publisher(s) this run did not start: what they send is not taken "
             "for its nodes' reports")


def _child_running(children: list[_Child], name: str, container: str | None) -> _Child | None:
    """The child running node ``name`` now: its own process, or the ``container`` (composed); None: none."""
    return next((child for child in children if child.name == (container or name)), None)


def _pid_running(children: list[_Child], name: str, container: str | None) -> int | None:
    """The pid of the process running node ``name`` now; None: none."""
    child = _child_running(children, name, container)
    return child.process.pid if child is not None else None


def _remove_earlier_runs_files(pipeline: Pipeline, out_dir: Path) -> None:
    """A reused ``--out``: the node logs, stacks and traces an earlier run left there go (the nodes append to theirs
    across restarts, so an earlier run's would be read as this one's)."""
    logs = [*(out_dir / "logs").glob("*.log"), *(out_dir / "logs").glob("*.stacks.txt")]
    for path in [*logs, *(_trace_path(out_dir, name) for name in pipeline.node_names)]:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _fill_failed_summary(error: BaseException | None, pipeline: Pipeline, options: PipelineOptions, table: StatsTable,
                         compose: bool, started: float, codes: dict[str, int], ignored: dict[str, int]) -> None:
    """A failed run's summary, once its nodes are stopped: what they reported, ``ok`` false, and why."""
    if isinstance(error, PipelineFailed) and error.summary is not None:
        reason = error.summary.get("failure", error.reason)
        error.summary = {**_summary(pipeline, options, table, compose, time.monotonic() - started, False, codes,
                                    ignored),
                         "ok": False, "failure": reason}


def _init_keeping_ctrl_c(rclpy: Any) -> None:
    """rclpy without its signal handlers where it allows (Humble's first releases did not): Ctrl-C is then a
    KeyboardInterrupt that leaves the context up, so the nodes' last reports can still be read."""
    try:
        from rclpy.signals import SignalHandlerOptions
    except ImportError:
        rclpy.init()
        return
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)


def _ask_for_report(children: list[_Child], container: str | None, name: str, node: str) -> None:
    """Ask node ``name`` (fully qualified: ``node``) for a report now, through the pipe of the process running it."""
    child = _child_running(children, name, container)
    if child is not None:
        child.requests.ask(node)


def _collect_last_reports(spinner: Any, table: StatsTable, ask: Callable[[str, str], None],
                          seconds_each: float = 3.0) -> None:
    """After Ctrl-C, while frames still flow: a fresh report from every node, last node first, each node's sent
    after the report taken of the node after it in the pipeline (nodes are listed upstream first).  A node's count
    then covers every frame the nodes downstream of it counted: the camera's frames published are at least every
    consumer's checked, preprocess's frames sent at least what inference checked.  (Taken at one moment instead,
    a node a report behind another showed fewer frames than the node reading it.)  Each is asked for it on
    ``ask(name, fully qualified name)`` (again every half second: its once-a-second report could come too late on a
    busy machine); a node without a fresh report within ``seconds_each`` (stopped, restarting) keeps its last.
    A node with no report yet is asked too, as ``*`` (every node of its process: its own name is in its report):
    on a loaded machine a camera's first reports can still be in discovery when Ctrl-C comes, and the summary then
    said it published nothing.  Such nodes are all asked at once first, and share one ``seconds_each`` from the
    first of them reached: many that never came up cost that once, not once each.  Each node's report, once taken,
    is its final one (:meth:`.StatsTable.keep_final`)."""
    after = time.time()
    unreported = [name for name in table.order if name not in table.latest]
    shared: float | None = None  # the unreported nodes' one deadline
    try:
        for name in unreported:
            ask(name, "*")
        pre_asked = time.monotonic()
        for name in reversed(table.order):
            if name in table.latest:
                deadline, asked = time.monotonic() + seconds_each, 0.0
            else:  # asked just now: again once half a second has passed
                shared = shared or time.monotonic() + seconds_each
                deadline, asked = shared, pre_asked
            while time.monotonic() < deadline and (name not in table.latest or table.latest[name]["time"] <= after):
                if time.monotonic() - asked >= 0.5:
                    ask(name, table.latest[name]["node"] if name in table.latest else "*")
                    asked = time.monotonic()
                spinner.spin_once(timeout_sec=0.05)
            if name in table.latest:
                table.keep_final(name)
                after = max(after, table.latest[name]["time"])
    except Exception:  # the context was shut down by rclpy's own handler, or Ctrl-C again: keep what we have
        return


def _restart_due(children: list[_Child], restarts: Restarts) -> None:
    """Put the children whose back-off is over back in ``children``, in their places."""
    for name, child in restarts.start_due():
        index = next(i for i, c in enumerate(children) if c.name == name)
        children[index].requests.close()  # the dead process's pipe: the new one has its own
        children[index] = child


def _watch(spinner: Any, table: StatsTable, children: list[_Child], screen: _Screen, started: float,
           restarts: Restarts, watcher: Watcher | None) -> None:
    next_draw = started + 1.0
    stable, signature, last_report_time = 0, None, None
    all_reported: float | None = None
    while True:
        spinner.spin_once(timeout_sec=0.1)
        _restart_due(children, restarts)
        if watcher is not None:
            watcher(table, {child.name: child.process.pid for child in children})
        for child in children:
            code = child.process.poll()
            if code is not None and not restarts.handles(child.name, code, child.started):
                raise PipelineFailed(f"{child.name} (pid {child.process.pid}) exited with code {code} after "
                                     f"{time.monotonic() - child.started:.1f} s; its log ({child.log}) ends:\n"
                                     f"{child.tail()}")
        now = time.monotonic()
        missing = [name for name in table.order if name not in table.latest]
        if missing and now - started > STARTUP_TIMEOUT:
            logs = "\n".join(f"  {child.name} (pid {child.process.pid}, still running), its log ends:\n{child.tail()}"
                             for child in children if child.name in missing or len(children) == 1)
            raise PipelineFailed(f"{', '.join(missing)} never reported in {STARTUP_TIMEOUT:.0f} s; logs in "
                                 f"{children[0].log.parent}\n{logs}")
        if now >= next_draw:
            next_draw += 1.0
            screen.show(f"{screen.title}  t={now - started:.0f}s\n{table.render()}")
        source = table.latest.get(table.order[0])
        if not missing and all_reported is None:
            all_reported = now
        if source is not None and source["out"] == 0 and all_reported is not None \
                and now - all_reported > FIRST_FRAME_TIMEOUT:
            raise PipelineFailed(f"{table.order[0]} sent no frame in the {FIRST_FRAME_TIMEOUT:.0f} s after every node "
                                 f"reported: it, or a node after it, still waits for a subscription (seen when a "
                                 f"process's DDS discovery missed another's endpoint for good); logs in "
                                 f"{children[0].log.parent}\n{table.render()}")
        if source is None or not source.get("done") or missing:
            continue
        report_time = max(report["time"] for report in table.latest.values())
        if report_time == last_report_time:
            continue
        last_report_time = report_time
        current = tuple((name, r["in"], r["out"], r["checked"], r["bad"], r["stale"]) for name, r in
                        sorted(table.latest.items()))
        stable = stable + 1 if current == signature else 0
        signature = current
        if stable >= DRAIN_REPORTS * len(table.latest):
            screen.show(f"{screen.title}  t={now - started:.0f}s (done)\n{table.render(totals=True)}")
            return


def _summary(pipeline: Pipeline, options: PipelineOptions, table: StatsTable, compose: bool, wall: float,
             interrupted: bool, codes: dict[str, int], ignored: dict[str, int]) -> dict[str, Any]:
    """What the run's nodes reported; ``ignored``: messages on the stats topic that were not their reports, by why."""
    nodes = {name: table.latest.get(name) for name in pipeline.node_names}
    consumers = {name: report for name, report in nodes.items() if report and not report.get("source")}
    source = nodes.get(pipeline.source) or {}
    preview = options.out_dir.resolve() / "preview.png"
    # Every node reported; several may be sources (multicam's cameras): each consumer checked frames, none bad.
    ok = bool(source.get("out")) and all(r["checked"] > 0 and r["bad"] == 0 for r in consumers.values()) \
        and all(report is not None for report in nodes.values()) and bool(consumers) and not any(codes.values())
    elapsed = source.get("elapsed_s") or 0.0
    return {
        "pipeline": pipeline.name, "source": pipeline.source, "mode": "composed" if compose else "separate", "ok": ok,
        "interrupted": interrupted, "wall_seconds": round(wall, 2),
        "options": {**asdict(options), "out_dir": str(options.out_dir)},
        "frames_published": source.get("out", 0),
        "source_seconds": elapsed,
        "frames_checked": {name: r["checked"] for name, r in consumers.items()},
        "fps": {name: round(r["checked"] / elapsed, 2) if elapsed else None
                for name, r in {pipeline.source: {"checked": source.get("out", 0)}, **consumers}.items()},
        "latency_ms": {name: r["latency_ms_total"] for name, r in consumers.items()},
        "latency_ms_steady": {name: r.get("latency_ms_steady") for name, r in consumers.items()},
        "latency_ms_warmup": {name: r.get("latency_ms_warmup") for name, r in consumers.items()},
        "cpu": {name: r.get("cpu") for name, r in nodes.items() if r},
        "cpu_shared_by": table.shared_processes(),
        "restarts": dict(table.restarts),
        "same_process_reads": {name: r.get("same_process_reads") for name, r in consumers.items()},
        "exit_codes": codes,
        "reports_ignored": dict(ignored),
        "preview_png": str(preview) if preview.exists() else None,
        "nodes": nodes,
    }


def write_summary(summary: dict[str, Any], out_dir: Path) -> Path:
    path = out_dir.resolve() / "pipeline-summary.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def print_outcome(summary: dict[str, Any], stream: IO[str] = sys.stdout) -> None:
    """The few lines that say what happened."""
    prefix = summary["pipeline"]
    source_fps = summary["fps"].get(summary["source"])
    stream.write(f"{prefix}: {summary['frames_published']} frames published"
                 f"{f' ({source_fps:.1f} fps)' if source_fps else ''} in a run of {summary['wall_seconds']:.1f} s; "
                 f"checked at each consumer: {', '.join(f'{k} {v}' for k, v in summary['frames_checked'].items())}\n")
    for name, latency in summary["latency_ms"].items():
        fps = summary["fps"].get(name)
        rate = f"{fps:5.1f} fps checked, " if fps is not None else ""
        if latency["n"]:
            stream.write(f"{prefix}: {name:<10} {rate}latency from the {summary['source']}'s stamp p50 {latency['p50']:.1f} ms, "
                         f"p99 {latency['p99']:.1f} ms ({latency['n']} frames){_steady_and_cpu(summary, name)}\n")
    source_cpu = _cpu_text(summary.get("cpu", {}).get(summary["source"]))
    if source_cpu:
        stream.write(f"{prefix}: {summary['source']:<10} {source_cpu.lstrip('; ')}\n")


def _cpu_text(cpu: dict[str, Any] | None) -> str:
    if not cpu or cpu.get("cpu_ms_per_frame_steady") is None:
        return ""
    return f"; CPU {cpu['cpu_ms_per_frame_steady']:.2f} ms a frame in the steady state, {cpu['cpu_s']:.1f} s in all"


def _steady_and_cpu(summary: dict[str, Any], name: str) -> str:
    """The steady state's percentiles (after the node's warm-up frames) and the node's CPU, where reported."""
    steady = (summary.get("latency_ms_steady") or {}).get(name) or {}
    text = f"; steady state p50 {steady['p50']:.1f} / p99 {steady['p99']:.1f} ms ({steady['n']})" if steady.get("n") else ""
    return text + _cpu_text(summary.get("cpu", {}).get(name))


def main(argv: Sequence[str] | None = None) -> int:
    parser = tool_parser(__name__, __doc__, prog="pipeline")
    parser.add_argument("pipeline", choices=sorted(PIPELINES), help="which pipeline")
    add_run_arguments(parser)
    add_record_argument(parser)
    parser.add_argument("--restart", choices=RESTART_POLICIES, default="no",
                        help="on-failure: start a node whose process dies again, after a back-off of 0.5 s doubling "
                             "to 8 s; always: one that ends with exit code 0 unasked too; the table counts restarts "
                             "(default: %(default)s)")
    parser.add_argument("--trace", action="store_true",
                        help="every node writes a line per frame to OUT/trace/NODE.jsonl (callback wake-up, read, "
                             "work, release, GC pauses); the end says where the slowest 1%% of frames spent it")
    args = parser.parse_args(argv)
    if args.record is not None and args.record.exists():
        parser.error(f"--record {args.record}: exists already; bag_record writes a new bag")
    options, why = options_from(parser, args, args.pipeline)
    pipeline = PIPELINES[args.pipeline](options)
    if args.trace:
        pipeline = traced(pipeline, options.out_dir)
    mode = ("composed in one container" if args.compose else "separate processes") + \
        ("" if args.executor == "single" else f", {args.executor} executor")
    print(f"{pipeline.name}: {options.width}x{options.height} at {options.fps:g} fps, {mode}, "
          f"{options.memory} memory ({why})", flush=True)
    title = f"{pipeline.name} · {mode} · {options.memory} memory · {options.width}x{options.height}"
    try:
        summary = run_pipeline(pipeline, options, compose=args.compose, executor=args.executor, title=title,
                               record=args.record, restart=args.restart)
    except PipelineFailed as exc:
        return report_failure(pipeline.name, exc, options.out_dir)
    summary["executor"] = args.executor  # every node's (the container's, composed)
    if args.trace:
        summary["tail_frames"] = tail_frames(pipeline, options.out_dir)
    path = write_summary(summary, options.out_dir)
    print_outcome(summary)
    print_tail_frames(summary.get("tail_frames", {}))
    print(f"{pipeline.name}: summary {path}; preview {summary['preview_png'] or '(none written)'}")
    if args.record is not None:
        print(f"{pipeline.name}: recorded into {args.record} (bag_record's table: {options.out_dir / 'logs'}/"
              "bag_record.log)")
    if summary["ok"] or summary["interrupted"]:
        return 0
    print(f"{pipeline.name}: FAILED: {'; '.join(failure_reasons(summary))}", flush=True)
    return 1


def report_failure(name: str, failure: PipelineFailed, out_dir: Path) -> int:
    """A failed run: the details (logs) first, the summary written (marked failed), the reason on the last line."""
    print(f"{name}: {failure}", file=sys.stderr, flush=True)
    if failure.summary is not None:
        print(f"{name}: summary {write_summary(failure.summary, out_dir)} (failed)", flush=True)
    print(f"{name}: FAILED: {failure.reason}", file=sys.stderr, flush=True)
    return 1


def failure_reasons(summary: dict[str, Any]) -> list[str]:
    """Why a finished run is not ok, one phrase a cause, from its summary."""
    reasons = []
    if not summary["frames_published"]:
        reasons.append(f"{summary['source']} published no frame")
    reasons += [f"{name} checked no frame" for name, checked in summary["frames_checked"].items() if not checked]
    reasons += [f"{name} found {report['bad']} bad frames" for name, report in summary["nodes"].items()
                if report and not report.get("source") and report.get("bad")]
    reasons += [f"{name} never reported" for name, report in summary["nodes"].items() if not report]
    reasons += [f"{name} exited with code {code}" for name, code in summary["exit_codes"].items() if code]
    return reasons or ["see the table above"]


def console_main() -> None:
    raise SystemExit(run_tool(main))


if __name__ == "__main__":
    console_main()
