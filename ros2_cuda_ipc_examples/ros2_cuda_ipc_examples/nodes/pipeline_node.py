"""``PipelineNode``: an example node that counts its frames and reports them once a period.

Every example node publishes a JSON report on ``pipeline_stats`` (``std_msgs/String``): totals since
it started (frames in and out, checks, stale drops, lost frames), the latency from the camera's
stamp over the last period, over the first ``warmup_frames`` (default 30) and over the steady state
after them, its process's CPU per frame and share of a core, and the collector's pauses.
``trace_path`` (a file) traces every frame read: see :class:`~.frame_stats.FrameTrace`. The pipeline
runner's live table and summary are made from these reports, the same way whether the nodes share a
process or not (composed, they share one process's CPU counters).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rclpy.node import Node
from std_msgs.msg import String

from ros2_cuda_ipc_core import (
    DEFAULT_REUSE_DELAY,
    NodeParameter,
    ParameterError,
    PoolUnavailableError,
    Ros2CudaIpcError,
    StaleDescriptorError,
    check_reuse_delay,
    check_topic,
    declare,
)

from .arrays import ArrayBackend, MemoryChoiceError, backend_for, choose_memory
from .frame_stats import FrameTrace, LatencySamples, ProcessCpu, gc_pauses
from .report_requests import ChannelError, Registration, register
from .report_signature import report_key_from_environment, sign_report
from .upstream import UpstreamWatch

__all__ = ["STATS_TOPIC", "ParameterError", "PipelineNode"]

STATS_TOPIC = "pipeline_stats"
#: How often a node started by a runner looks whether the runner asked for a report (see _listen_for_report_requests).
REQUEST_POLL_S = 0.1
_MAX_LATENCIES = 100_000
_MAX_PUBLISHERS = 16  # processes whose frames in_by_publisher counts: a restarted publisher is a new one


class PipelineNode(Node):
    """A node with frame counters, latency samples, a ``stats_period`` parameter and the report timer."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("stats_period", 1.0, "seconds between two reports on pipeline_stats"),
        NodeParameter("block_count", 4, "blocks in each pool this node publishes from (at least 2)"),
        NodeParameter("diagnostics", True, "report this node's pools and readers on /diagnostics once a second"),
        NodeParameter("reuse_delay", DEFAULT_REUSE_DELAY, "seconds before a published block is reused (finite, not negative)"),
        NodeParameter("warmup_frames", 30, "first frames left out of the steady-state latency percentiles"),
        NodeParameter("trace_path", "", "write each frame's timings to this file (empty: none)"),
    )

    def __init__(self, default_name: str, **kwargs: Any) -> None:
        super().__init__(default_name, **kwargs)
        self.parameter("diagnostics")  # declared first: the pools and readers made next read it
        self.counts = {"in": 0, "out": 0, "checked": 0, "bad": 0, "stale": 0, "lost": 0, "gone": 0}
        #: Frames taken in, by the process id that published them: a publisher killed before its last report then
        #: still has its frames counted by those who got them (see the live table's frames published).
        self.in_by_publisher: dict[int, int] = {}
        warmup_frames = self.parameter("warmup_frames")
        if warmup_frames < 0:
            raise ParameterError(f"warmup_frames must not be negative, not {warmup_frames}")
        self._latencies = LatencySamples(warmup_frames)
        self._cpu = ProcessCpu()
        self._gc = gc_pauses()
        self._last_latency: float | None = None
        trace_path = self.parameter("trace_path")
        self._trace = FrameTrace(Path(trace_path)) if trace_path else None
        self._last_seq: int | None = None
        self._first_seq: int | None = None  # of this life: the runner counts the frames a restart lost from it
        self._report_key = report_key_from_environment()
        self._born = time.monotonic()
        self._drops: list[tuple[float, str, int]] = []  # the first few (seconds since start, kind, frames): when
        self._backends: dict[str, ArrayBackend] = {}
        self._subscriptions_read: list[Any] = []
        self._reports = self.create_publisher(String, STATS_TOPIC, 10)
        period = self.parameter("stats_period")
        if period <= 0:
            raise ParameterError(f"stats_period must be positive, not {period}")
        self.create_timer(period, self.report)
        self._reports_asked = 0  # reports sent because the runner asked (the report's reports_asked)
        self._requests = self._listen_for_report_requests()

    def parameter(self, name: str) -> Any:
        """Declare parameter ``name`` from the class's ``PARAMETERS`` table and return its value as the default's
        type (``fps:=30`` is 30.0); another type is a :class:`ParameterError` naming it."""
        return declare(self, name)

    def pool_parameters(self) -> tuple[int, float]:
        """``block_count`` (default 4, at least 2) and ``reuse_delay`` (seconds before a published block is
        reused, default 0.01, finite and not negative) of the pools this node publishes from."""
        block_count = self.parameter("block_count")
        if block_count < 2:
            raise ParameterError(f"block_count must be at least 2, not {block_count}")
        try:
            reuse_delay = check_reuse_delay(self.parameter("reuse_delay"))
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        return block_count, reuse_delay

    def backend(self, memory: str) -> ArrayBackend | None:
        """The array library for frames in ``memory``, made once; None (said once, in the log) if there is none."""
        if memory not in self._backends:
            try:
                self._backends[memory] = backend_for(memory)
            except MemoryChoiceError as exc:
                self.get_logger().error(f"cannot process {memory} frames: {exc}")
                return None
        return self._backends[memory]

    def prepare_gpu(self) -> ArrayBackend | None:
        """Where frames will live on the GPU (CUDA usable, torch or cupy installed), make the backend and so the
        CUDA context now: in the first frame's callback it would take long enough for frames to go stale."""
        if choose_memory("auto")[0] != "cuda":
            return None
        return self.backend("cuda")

    def subscribe(self, message_type: type, topic: str, callback: Callable[[Any], None], qos: int = 10) -> Any:
        """``create_subscription``, with an :class:`UpstreamWatch` that says when nothing comes or its publisher left,
        and core's topic check, which says when the topic is published as another type or not at all (a typo)."""
        watch = UpstreamWatch(self, topic, message_type)
        check = check_topic(self, topic, message_type)

        def on_message(msg: Any) -> None:
            check.cancel()
            watch.seen()
            callback(msg)

        return self.create_subscription(message_type, topic, on_message, qos)

    def subscribe_when_read(self, output_topic: str, readers: int, subscribe: Callable[[], object]) -> None:
        """Call ``subscribe`` now, or (``readers`` > 0) once that many nodes subscribe to ``output_topic``: a chain
        of nodes then starts taking frames only when the nodes after it are connected (and warmed up)."""
        if readers <= 0:
            subscribe()
            return
        resolve = getattr(self, "resolve_topic_name", None)  # rclpy newer than Humble's first releases
        topic = resolve(output_topic) if resolve is not None else output_topic

        def check() -> None:
            if self.count_subscribers(topic) >= readers:
                timer.cancel()
                self.destroy_timer(timer)
                subscribe()

        timer = self.create_timer(0.1, check)

    def subscribe_frames(self, subscription_type: Callable[..., Any], topic: str,
                         work: Callable[[Any, ArrayBackend], None], qos: Any = 10, **options: Any) -> Any:
        """Every frame of ``topic`` through ``subscription_type`` (``ImageSubscription``, ``PointCloudSubscription``):
        zero-copy where the publisher's pool maps, else through its CPU twin, so a pipeline split across
        machines, users or containers runs unchanged.  ``work(view, arrays)`` runs on the view's backend,
        ordered on its stream; fallback frames land on the GPU when this node works there.  ``options`` go to
        the subscription (``reader=``, ``fallback=``)."""
        gpu = self.prepare_gpu()
        memory = "cuda" if gpu is not None else "host"
        watch = UpstreamWatch(self, topic)

        def on_view(view: Any) -> None:
            watch.seen()
            self.counts["in"] += 1
            self.taken_from(view.handle.publisher_pid)
            arrays = self.backend(view.memory)
            trace = self._trace
            if trace is not None:  # the subscription has read the frame already: its read is in the wait
                trace.start(self._since(view.header.stamp))
                trace.mark()
                self._last_latency = None
            with view:
                if arrays is None:
                    self.counts["bad"] += 1
                    return
                with arrays.activate():
                    work(view, arrays)
                if trace is not None:
                    trace.mark()
            if trace is not None:
                trace.mark()
                trace.finish(self._last_latency)

        subscription = subscription_type(self, topic, on_view, qos, memory=memory,
                                         stream=gpu.stream if gpu is not None else None, **options)
        watch.expect(subscription.message_type)  # before its first look (after first_wait s), on this thread
        self._subscriptions_read.append(subscription)
        return subscription

    def subscription_stats(self) -> dict[str, Any]:
        """Frames by path and drops of the subscriptions made by :meth:`subscribe_frames` (the report's ``paths``)."""
        frames: dict[str, int] = {}
        dropped: dict[str, int] = {}
        for subscription in self._subscriptions_read:
            stats = subscription.stats()
            for table, counts in ((frames, stats["frames"]), (dropped, stats["dropped"])):
                for name, n in counts.items():
                    table[name] = table.get(name, 0) + n
        return {"paths": frames, "dropped": dropped} if self._subscriptions_read else {}

    def read_frame(self, reader: Any, msg: Any, memory: str, work: Callable[[Any, ArrayBackend], None]) -> None:
        """Lease ``msg``'s frame with ``reader`` on the memory's backend stream and call ``work(view, arrays)``;
        a stale frame is counted and dropped, so is one whose publisher is gone (it died: a restarted one
        names a new pool), any other transport error counted as bad and logged."""
        self.counts["in"] += 1
        self.taken_from(msg.core.publisher_pid)
        arrays = self.backend(memory)
        if arrays is None:
            self.counts["bad"] += 1
            return
        trace = self._trace
        if trace is not None:
            trace.start(self._since(msg.header.stamp))
            self._last_latency = None
        try:
            with arrays.activate(), reader.read(msg, arrays.stream) as view:
                if trace is not None:
                    trace.mark()
                work(view, arrays)
                if trace is not None:
                    trace.mark()
            if trace is not None:
                trace.mark()
                trace.finish(self._last_latency)
        except StaleDescriptorError:
            self.counts["stale"] += 1
            self._dropped("stale", 1)
        except PoolUnavailableError as exc:
            self.counts["gone"] += 1
            self.get_logger().info(f"frame dropped: {exc}", throttle_duration_sec=5.0)
        except Ros2CudaIpcError as exc:
            self.counts["bad"] += 1
            self.get_logger().warning(f"frame dropped: {exc}", throttle_duration_sec=5.0)

    def taken_from(self, publisher_pid: int) -> None:
        """Count a frame taken in from the process ``publisher_pid`` (the descriptor's word; the last
        ``_MAX_PUBLISHERS`` processes are kept)."""
        if publisher_pid not in self.in_by_publisher and len(self.in_by_publisher) >= _MAX_PUBLISHERS:
            del self.in_by_publisher[next(iter(self.in_by_publisher))]
        self.in_by_publisher[publisher_pid] = self.in_by_publisher.get(publisher_pid, 0) + 1

    def frame_seen(self, seq: int) -> None:
        """Count frames the camera numbered but this node never got (dropped on the way)."""
        if self._last_seq is not None and seq > self._last_seq + 1:
            self.counts["lost"] += seq - self._last_seq - 1
            self._dropped(f"lost after {self._last_seq}", seq - self._last_seq - 1)
        if self._first_seq is None:
            self._first_seq = seq
        self._last_seq = seq if self._last_seq is None else max(seq, self._last_seq)

    def _dropped(self, kind: str, frames: int) -> None:
        if len(self._drops) < 8:
            self._drops.append((round(time.monotonic() - self._born, 2), kind, frames))

    def latency_from(self, stamp: Any) -> float:
        """Milliseconds from the camera's ``stamp`` to now, recorded for the report."""
        latency = self._last_latency = self._since(stamp)
        self._latencies.add(latency)
        if self._latencies.warmed_up:
            self.warmup_over()
        return latency

    def _since(self, stamp: Any) -> float:
        return (self.get_clock().now().nanoseconds - (stamp.sec * 1_000_000_000 + stamp.nanosec)) / 1e6

    @property
    def warmup_frames(self) -> int:
        """Frames counted as warm-up, apart from the steady state (parameter ``warmup_frames``)."""
        return self._latencies.warmup_frames

    def warmup_over(self) -> None:
        """The steady state starts now: its CPU per frame is counted from here (the first call counts)."""
        self._cpu.steady_from_now(self.frames_done())

    def frames_done(self) -> int:
        """The frames this node's CPU is shared over: those it took in (a source: those it sent)."""
        return self.counts["in"]

    def extra_stats(self) -> dict[str, Any]:
        """What a node adds to its report (reader or pool counters)."""
        return {}

    def _listen_for_report_requests(self) -> Registration | None:
        """A report soon when the runner that started this process asks for it (its last reports, after Ctrl-C):
        over its pipe (see :mod:`.report_requests`).  The reader thread sets a flag that a timer looks at every
        :data:`REQUEST_POLL_S`: a guard condition would wake the executor at once, but rclpy's C++ events executor
        refuses a node that has one (``--executor events``)."""
        asked = threading.Event()
        try:
            registration = register(self.get_fully_qualified_name(), asked.set)
        except ChannelError as exc:
            self.get_logger().warning(f"no report requests: {exc}")
            registration = None
        if registration is not None:
            self.create_timer(REQUEST_POLL_S, lambda: self._on_report_request(asked))
        return registration

    def destroy_node(self) -> None:
        requests = getattr(self, "_requests", None)  # unset when the parameters were refused
        if requests is not None:
            requests.close()
            self._requests = None
        trace = getattr(self, "_trace", None)  # unset when the parameters were refused
        if trace is not None:
            trace.close()
            self._trace = None
        super().destroy_node()

    def _on_report_request(self, asked: threading.Event) -> None:
        """A report now if the runner asked for one since the last tick: at most one a tick (ten a second), however
        often it asks."""
        if asked.is_set():
            asked.clear()
            self._reports_asked += 1
            self.report()

    def report(self) -> None:
        read = self.subscription_stats()
        counts = dict(self.counts)
        if read:  # frames a subscription dropped stale came in too, as they did through read_frame
            stale = read["dropped"].get("stale", 0)
            counts["in"] += stale
            counts["stale"] += stale
        stats = {"node": self.get_fully_qualified_name(), "kind": type(self).__name__, "pid": os.getpid(),
                 "time": time.time(), **counts, "in_by_publisher": {str(pid): n for pid, n in self.in_by_publisher.items()},
                 **read, **self._latencies.report(),
                 "cpu": self._cpu.report(self.frames_done()), "gc_pauses": self._gc.report(), "first_drops": self._drops,
                 "seq_first": self._first_seq, "seq_last": self._last_seq, "reports_asked": self._reports_asked,
                 **self.extra_stats()}
        body = json.dumps(stats)
        self._reports.publish(String(data=sign_report(body, self._report_key) if self._report_key else body))
