"""Where a bare descriptor's publish -> callback time goes, boundary by boundary: a developer's profile.

    python tools/profile_delivery.py [--rate 30] [--count 300] [--rows dds-executor dds-waitset ...] [--json OUT]

A child process publishes a ``GpuImage`` descriptor (no frame behind it, as the benchmark's floor)
once per tick of ``--rate`` and sleeps in between; this process receives it and is idle in between.
Every timestamp is CLOCK_REALTIME (``time.time_ns``), the clock Fast DDS stamps its samples with,
so stamps of both processes and of Fast DDS's own threads share one time line.

Rows (each a fresh publisher process and subscription, run one after the other):

``dds-typed``      rclpy + Fast DDS as a user gets them (the benchmark's floor): a typed subscription on
                   a stock ``SingleThreadedExecutor``, instrumented (its wait set's ``wait`` and its
                   ``_take_subscription`` are timed); the take includes deserialization.
``dds-raw``        the same with ``raw=True``: the callback deserializes (``deserialize_message``), so
                   deserialization is timed on its own.
``dds-struct``     DDS with no rclpy conversion on either side: the publisher publishes the message's CDR
                   bytes built by ``struct``, the ``raw=True`` callback reads them back by ``struct``.
``dds-waitset``    the same DDS path received by a bare loop on rclpy's wait set: no executor.
``socket-cdr``     the same-host prototype: the publisher first sends the serialized message over a
                   Unix socket, then publishes it on DDS; a thread of this process blocked in ``recv``
                   triggers a guard condition whose callback the same timed executor runs; each DDS
                   twin is dropped in the subscription's callback.
``socket-struct``  the same with the descriptor's fields packed by ``struct`` instead of CDR (no ROS
                   message built on either side of the socket).
``socket-direct``  ``socket-struct`` read by the main thread itself, no executor: a same-host wake alone.

The publisher alternates two ways to publish on DDS: even frames ``publish(msg)`` (rclpy's
conversion, serialization and write in one call), odd frames ``serialize_message`` then
``publish(bytes)``, which splits serialization from the middleware's write.  Boundaries, per frame:

publisher: ``stamp`` (before publishing) -> ``serialized`` -> [``socket sent``] -> ``published``;
Fast DDS: ``source`` (the writer's timestamp of the sample) -> ``received`` (the reader's
reception timestamp, in Fast DDS's receive thread); subscriber: ``woken`` (the wait set's ``wait``
returned in Python) -> ``take start`` -> ``take end`` -> ``callback`` (the user callback starts)
-> ``deserialized``.  It reaches private rclpy names on purpose; nothing here is imported by the packages.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

ROWS = ("dds-typed", "dds-raw", "dds-struct", "dds-waitset", "socket-cdr", "socket-struct", "socket-direct")
TOPIC = "ros2_cuda_ipc_profile_delivery/descriptor"
WARMUP = 10
#: A real descriptor's socket path ("@ros2_cuda_ipc/<pid>.<pid ns>/<pool id>"), so the message has its real size.
SOCKET_PATH = f"@ros2_cuda_ipc/{0:7d}.{0:10d}/{'0' * 32}"
now = time.time_ns


def _qos() -> Any:
    from rclpy.qos import QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy

    return QoSProfile(depth=5, history=QoSHistoryPolicy.KEEP_LAST, reliability=QoSReliabilityPolicy.RELIABLE)


def _descriptor(seq: int) -> Any:
    from ros2_cuda_ipc_msgs.msg import GpuImage

    msg = GpuImage(encoding="rgba8", shape=[2160, 3840, 4], strides=[3840 * 4, 4, 1])
    msg.core.socket_path, msg.core.byte_size, msg.core.uid, msg.core.block_id = SOCKET_PATH, 3840 * 2160 * 4, seq, seq % 4
    msg.header.frame_id = str(seq)
    return msg


def _set_stamp(msg: Any, stamp: int) -> None:
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)


def _seq_of(msg: Any) -> int:
    return int(msg.frame_id if isinstance(msg, Unpacked | CdrUnpacked) else msg.header.frame_id)


#: The prototype's compact form of a descriptor: the BufferCore fields, the image layout, stamp and frame id.
PACKED = struct.Struct("<16sIQIBI64sQB3I3QiI")


def _pack(msg: Any) -> bytes:
    """What a same-host sender could send instead of the CDR message: fixed fields by ``struct``."""
    core, header = msg.core, msg.header
    return PACKED.pack(core.pool_id.tobytes(), core.block_id, core.uid, core.publisher_pid, core.memory,
                       core.device_id, core.event_handle.tobytes(), core.byte_size, msg.dtype, *msg.shape.tolist(),
                       *msg.strides.tolist(), header.stamp.sec, header.stamp.nanosec) \
        + b"\0".join((core.socket_path.encode(), msg.encoding.encode(), header.frame_id.encode()))


class Unpacked:
    """The receiving end of ``_pack``: plain attributes, no ROS message."""

    __slots__ = ("encoding", "fields", "frame_id", "socket_path")

    def __init__(self, data: bytes) -> None:
        self.fields = PACKED.unpack_from(data)
        self.socket_path, self.encoding, self.frame_id = data[PACKED.size:].decode().split("\0")


def _align(offset: int, size: int) -> int:
    """CDR alignment: counted from after the 4-byte encapsulation header."""
    return offset + (-(offset - 4) % size)


class _CdrWriter:
    """Just enough of a CDR (XCDR1, little endian) writer for a ``GpuImage``: the ``dds-struct`` row."""

    def __init__(self) -> None:
        self.data = bytearray(b"\0\1\0\0")

    def put(self, fmt: str, size: int, *values: Any) -> None:
        self.data += bytes(_align(len(self.data), size) - len(self.data))
        self.data += struct.pack("<" + fmt, *values)

    def string(self, text: str) -> None:
        raw = text.encode() + b"\0"
        self.put("I", 4, len(raw))
        self.data += raw


def _cdr_pack(msg: Any) -> bytes:
    """The bytes ``serialize_message`` makes of a ``GpuImage``, by ``struct``, with no rclpy conversion."""
    core, header = msg.core, msg.header
    out = _CdrWriter()
    out.put("iI", 4, header.stamp.sec, header.stamp.nanosec)
    out.string(header.frame_id)
    out.put("B", 1, msg.dtype)
    out.put("3I", 4, *msg.shape.tolist())
    out.put("3Q", 8, *msg.strides.tolist())
    out.string(msg.encoding)
    out.string(core.socket_path)
    out.put("16s", 1, core.pool_id.tobytes())  # octets: no alignment of their own
    out.put("I", 4, core.block_id)
    out.put("QIB", 8, core.uid, core.publisher_pid, core.memory)
    out.put("I64s", 4, core.device_id, core.event_handle.tobytes())
    out.put("Q", 8, core.byte_size)
    return bytes(out.data)


class CdrUnpacked:
    """A ``GpuImage``'s CDR read back by ``struct``: the fields as plain values, no ROS message."""

    __slots__ = ("encoding", "fields", "frame_id", "socket_path", "stamp")

    def __init__(self, data: bytes) -> None:
        self.stamp = struct.unpack_from("<iI", data, 4)
        self.frame_id, offset = self._string(data, 12)
        dtype, = struct.unpack_from("<B", data, offset)
        offset = _align(offset + 1, 4)
        shape = struct.unpack_from("<3I", data, offset)
        offset = _align(offset + 12, 8)
        strides = struct.unpack_from("<3Q", data, offset)
        self.encoding, offset = self._string(data, offset + 24)
        self.socket_path, offset = self._string(data, offset)
        pool_id, = struct.unpack_from("<16s", data, offset)
        offset = _align(offset + 16, 4)
        block_id, = struct.unpack_from("<I", data, offset)
        offset = _align(offset + 4, 8)
        uid, pid, memory = struct.unpack_from("<QIB", data, offset)
        offset = _align(offset + 13, 4)
        device, event = struct.unpack_from("<I64s", data, offset)
        byte_size, = struct.unpack_from("<Q", data, _align(offset + 68, 8))
        self.fields = (pool_id, block_id, uid, pid, memory, device, event, byte_size, dtype, shape, strides)

    @staticmethod
    def _string(data: bytes, offset: int) -> tuple[str, int]:
        offset = _align(offset, 4)
        length, = struct.unpack_from("<I", data, offset)
        return data[offset + 4:offset + 3 + length].decode(), offset + 4 + length


# --- the publisher (child process) ---------------------------------------------------------------------


def publish(row: str, rate: float, frames: int, socket_name: str) -> int:
    """Publish ``frames`` descriptors at ``rate``; print one JSON line of per-frame stamps at the end."""
    import rclpy
    from rclpy.serialization import serialize_message

    from ros2_cuda_ipc_msgs.msg import GpuImage

    rclpy.init()
    node = rclpy.create_node("profile_delivery_publisher")
    publisher = node.create_publisher(GpuImage, TOPIC, _qos())
    peer = None
    if row.startswith("socket"):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        listener.bind("\0" + socket_name)
        listener.listen(1)
        print("listening", flush=True)
        peer, _ = listener.accept()
        listener.close()
    deadline = time.monotonic() + 30
    while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the reader side of the match settles
    stamps: dict[int, list[int]] = {}
    period = 1.0 / rate
    start = time.monotonic() + period
    for seq in range(frames):
        msg = _descriptor(seq)
        delay = start + seq * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        stamp = now()
        _set_stamp(msg, stamp)
        if peer is not None and row == "socket-cdr":  # the socket first, then DDS (which carries every message)
            data = serialize_message(msg)
            serialized = now()
            peer.send(data)
            sent = now()
            publisher.publish(data)
            stamps[seq] = [stamp, serialized, sent, now()]
        elif peer is not None:
            data = _pack(msg)
            serialized = now()
            peer.send(data)
            sent = now()
            publisher.publish(msg)
            stamps[seq] = [stamp, serialized, sent, now()]
        elif row == "dds-struct":
            data = _cdr_pack(msg)
            serialized = now()
            publisher.publish(data)
            stamps[seq] = [stamp, serialized, 0, now()]
        elif seq % 2:
            data = serialize_message(msg)
            serialized = now()
            publisher.publish(data)
            stamps[seq] = [stamp, serialized, 0, now()]
        else:
            publisher.publish(msg)
            stamps[seq] = [stamp, 0, 0, now()]
    time.sleep(0.5)
    print(json.dumps(stamps), flush=True)
    if peer is not None:
        peer.close()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


# --- the subscriber (this process) --------------------------------------------------------------------


class Marks:
    """The latest wake of the executor's wait set, and each frame's subscriber-side stamps by name."""

    def __init__(self) -> None:
        self.woken = 0
        self.frames: dict[int, dict[str, int]] = collections.defaultdict(dict)
        self.pending: dict[str, int] = {}  # stamps taken before the frame's number is known
        self.twins = 0
        self.dds_first = 0  # the prototype: DDS twins whose callback ran before the fast path's

    def close_frame(self, seq: int, **stamps: int) -> None:
        self.frames[seq].update(self.pending, **stamps)
        self.pending = {}


def _timed_executor(marks: Marks, context: Any) -> Any:
    """A stock ``SingleThreadedExecutor`` whose wait set's ``wait`` and whose takes are timed."""
    import rclpy.executors as executors
    from rclpy.executors import SingleThreadedExecutor

    real = getattr(executors._rclpy, "real", executors._rclpy)  # type: ignore[attr-defined]

    class TimedWaitSet(real.WaitSet):  # type: ignore[name-defined]
        def wait(self, timeout: int) -> None:
            super().wait(timeout)
            marks.woken = now()

    class Implementation:
        """rclpy's C extension as the executor module sees it, with the timed wait set."""

        WaitSet = TimedWaitSet

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    Implementation.real = real  # type: ignore[attr-defined]
    executors._rclpy = Implementation()  # type: ignore[attr-defined, assignment]

    class TimedExecutor(SingleThreadedExecutor):
        def _take_subscription(self, sub: Any) -> Any:
            marks.pending["woken"] = marks.woken
            marks.pending["take start"] = now()
            taken = super()._take_subscription(sub)
            marks.pending["take end"] = now()
            return taken

        def _take_guard_condition(self, gc: Any) -> Any:
            marks.pending["woken"] = marks.woken
            return super()._take_guard_condition(gc)

    return TimedExecutor(context=context)


def _fast_path_thread(sock: socket.socket, inbox: collections.deque[tuple[bytes, int]], wake: Any) -> threading.Thread:
    """The prototype's reader: blocked in ``recv``, hands each message to the executor by a guard condition."""
    def run() -> None:
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            inbox.append((data, now()))
            wake.trigger()

    thread = threading.Thread(target=run, name="fast path reader", daemon=True)
    thread.start()
    return thread


def receive(row: str, rate: float, count: int, events: bool, bare: bool) -> tuple[Marks, dict[int, list[int]]]:
    """Start the publisher child for ``row``, receive its frames, return both sides' stamps."""
    import rclpy
    from rclpy.serialization import deserialize_message

    from ros2_cuda_ipc_msgs.msg import GpuImage

    frames = count + WARMUP
    socket_name = f"ros2_cuda_ipc_profile_delivery/{os.getpid()}/{row}"
    child = subprocess.Popen([sys.executable, __file__, "_publish", row, str(rate), str(frames), socket_name],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    marks = Marks()
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("profile_delivery_subscriber", context=context, start_parameter_services=not bare,
                             enable_rosout=not bare)
    sock = None
    decode: Callable[[bytes], Any] = Unpacked if row in ("socket-struct", "socket-direct") \
        else CdrUnpacked if row == "dds-struct" else functools.partial(deserialize_message, message_type=GpuImage)
    try:
        if row.startswith("socket"):
            if child.stdout.readline().strip() != "listening":
                raise RuntimeError("the publisher did not start")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            sock.connect("\0" + socket_name)
        if row == "socket-direct":
            assert sock is not None
            _receive_direct(sock, frames, marks, decode)
        elif row == "dds-waitset":
            subscription = node.create_subscription(GpuImage, TOPIC, lambda *_: None, _qos(), raw=True)
            _receive_waitset(context, subscription, frames, marks, decode)
        else:
            _receive_executor(row, context, node, sock, frames, rate, marks, decode, child, events)
        published = json.loads(child.communicate(timeout=30)[0].splitlines()[-1])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if sock is not None:
            sock.close()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    return marks, {int(seq): stamps for seq, stamps in published.items()}


def _receive_executor(row: str, context: Any, node: Any, sock: socket.socket | None, frames: int, rate: float,
                      marks: Marks, decode: Callable[[bytes], Any], child: subprocess.Popen[str], events: bool) -> None:
    """Spin the timed executor (or rclpy's C++ ``EventsExecutor``, untimed inside) until every frame came."""
    from ros2_cuda_ipc_msgs.msg import GpuImage

    seen: set[int] = set()

    def on_dds(msg: Any, info: Any) -> None:
        called = now()
        if row in ("dds-raw", "dds-struct"):
            msg = decode(msg)
        seq = _seq_of(msg)
        if sock is not None:  # the prototype: DDS only carries the twin here, counted, never timed
            marks.twins += 1
            marks.dds_first += seq not in seen
            marks.pending = {}
            return
        if info is None:
            marks.close_frame(seq, callback=called, deserialized=now())
        else:
            marks.close_frame(seq, callback=called, deserialized=now(), source=info["source_timestamp"],
                              received=info["received_timestamp"])

    def on_dds_only(msg: Any) -> None:  # the EventsExecutor fails on callbacks that take a MessageInfo
        on_dds(msg, None)

    if events:
        from rclpy.experimental import EventsExecutor  # type: ignore[attr-defined]

        executor = EventsExecutor(context=context)
    else:
        executor = _timed_executor(marks, context)
    executor.add_node(node)
    node.create_subscription(GpuImage, TOPIC, on_dds_only if events else on_dds, _qos(), raw=row in ("dds-raw", "dds-struct"))
    if sock is not None:
        inbox: collections.deque[tuple[bytes, int]] = collections.deque()

        def on_fast_path() -> None:
            called = now()
            while inbox:
                data, arrived = inbox.popleft()
                seq = _seq_of(decode(data))
                seen.add(seq)  # the same path would drop the DDS twin by (pool, block, uid)
                marks.close_frame(seq, recv=arrived, callback=called, deserialized=now())

        _fast_path_thread(sock, inbox, node.create_guard_condition(on_fast_path))
    deadline = time.monotonic() + frames / rate + 30
    while len(marks.frames) < frames and time.monotonic() < deadline and child.poll() is None:
        executor.spin_once(timeout_sec=0.2)
    drain = time.monotonic() + 1.0  # the prototype's last DDS twins
    while sock is not None and marks.twins < frames and time.monotonic() < drain:
        executor.spin_once(timeout_sec=0.1)
    executor.shutdown(timeout_sec=1.0)


def _receive_direct(sock: socket.socket, frames: int, marks: Marks, decode: Callable[[bytes], Any]) -> None:
    sock.settimeout(frames + 30)
    for _ in range(frames):
        data = sock.recv(65536)
        arrived = now()
        msg = decode(data)
        marks.close_frame(_seq_of(msg), recv=arrived, callback=arrived, deserialized=now())


def _receive_waitset(context: Any, subscription: Any, frames: int, marks: Marks,
                     deserialize: Callable[[bytes], Any]) -> None:
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    deadline = time.monotonic() + frames + 30
    with subscription.handle, context.handle:
        wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, context.handle)
        while len(marks.frames) < frames and time.monotonic() < deadline:
            wait_set.clear_entities()
            wait_set.add_subscription(subscription.handle)
            wait_set.wait(200_000_000)
            woken = now()
            taken = subscription.handle.take_message(subscription.msg_type, True)
            if taken is None:
                continue
            take_end = now()
            msg = deserialize(taken[0])
            marks.close_frame(_seq_of(msg), woken=woken, **{"take start": woken, "take end": take_end},
                              callback=take_end, deserialized=now(), source=taken[1]["source_timestamp"],
                              received=taken[1]["received_timestamp"])


# --- the split -----------------------------------------------------------------------------------------

#: (label, from, to) for each boundary, by how the row is received; a step a frame lacks a stamp for is skipped.
PUBLISH_STEPS = (
    ("publish(msg): convert, serialize, write", "stamp", "published/typed"),
    ("serialize (serialize_message; dds-struct: by struct)", "stamp", "serialized"),
    ("publish(bytes): the middleware's write", "serialized", "published/split"),
)
DDS_STEPS = (
    *PUBLISH_STEPS,
    ("write stamp -> reader's reception (Fast DDS)", "source", "received"),
    ("reception -> wait set returns (wake-up)", "received", "woken"),
    ("wake -> take starts (executor)", "woken", "take start"),
    ("take (dds-typed: with deserialization)", "take start", "take end"),
    ("take -> callback (executor dispatch)", "take end", "callback"),
    ("reception -> callback (wake, take, dispatch)", "received", "callback"),
)
SOCKET_STEPS = (
    ("serialize (CDR: serialize_message; struct: pack)", "stamp", "serialized"),
    ("socket send", "serialized", "sent"),
    ("then publish on DDS (CDR: bytes; struct: msg)", "sent", "published/split"),
    ("send starts -> recv returns (wake-up)", "serialized", "recv"),
    ("recv -> wait set returns (guard condition)", "recv", "woken"),
    ("wake -> callback (executor dispatch)", "woken", "callback"),
    ("recv -> callback (guard, wake, dispatch)", "recv", "callback"),
)
END_STEPS = (
    ("deserialize (CDR: deserialize_message; struct: unpack)", "callback", "deserialized"),
    ("stamp -> callback", "stamp", "callback"),
    ("stamp -> deserialized message", "stamp", "deserialized"),
)


def frame_stamps(marks: Marks, published: dict[int, list[int]]) -> list[dict[str, int]]:
    """Both sides' stamps of every measured frame, by boundary name."""
    rows = []
    for seq in sorted(marks.frames):
        if seq < WARMUP or seq not in published:
            continue
        stamp, serialized, sent, done = published[seq]
        stamps = {name: value for name, value in marks.frames[seq].items() if value}
        stamps["stamp"], stamps["seq"] = stamp, seq
        if serialized:
            stamps["serialized"] = serialized
        if sent:
            stamps["sent"] = sent
        stamps["published/split" if serialized else "published/typed"] = done
        rows.append(stamps)
    return rows


def split(rows: list[dict[str, int]], row: str) -> dict[str, list[float]]:
    """Microseconds per boundary for every frame that has both of its stamps."""
    steps: dict[str, list[float]] = {}
    for label, begin, end in (*(SOCKET_STEPS if row.startswith("socket") else DDS_STEPS), *END_STEPS):
        values = [(stamps[end] - stamps[begin]) / 1000 for stamps in rows if begin in stamps and end in stamps]
        if values:
            steps[label] = values
    return steps


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_split(row: str, steps: dict[str, list[float]], twins: int) -> None:
    print(f"\n{row}  (us; p50 / p90 / p99; frames per step)" + (f"; DDS twins dropped: {twins}" if twins else ""))
    for label, values in steps.items():
        print(f"  {label:<48} {statistics.median(values):9.1f} {percentile(values, 0.9):9.1f} "
              f"{percentile(values, 0.99):9.1f}  n={len(values)}")


def print_conversions(rate: float, count: int) -> None:
    """rclpy's message conversions alone, one call per frame period (cold, as in a camera's callback)."""
    from rclpy.serialization import deserialize_message, serialize_message
    from std_msgs.msg import String

    descriptor = _descriptor(1)
    print(f"\nconversions, one call per {1e3 / rate:.1f} ms (us, p50 / p90)")
    for name, msg in (("GpuImage", descriptor), ("BufferCore", descriptor.core), ("std_msgs/Header", descriptor.header),
                      ("std_msgs/String (60 chars)", String(data="x" * 60))):
        kind, data = type(msg), serialize_message(msg)
        calls: dict[str, Callable[[], Any]] = {"serialize": functools.partial(serialize_message, msg),
                                               "deserialize": functools.partial(deserialize_message, data, kind),
                                               "construct": kind}
        times: dict[str, list[float]] = {label: [] for label in calls}
        for _ in range(min(count, 100) + WARMUP):
            for label, call in calls.items():
                time.sleep(1.0 / rate)
                start = time.perf_counter_ns()
                call()
                times[label].append((time.perf_counter_ns() - start) / 1000)
        print(f"  {name:<28} {len(data):4d} B  " + "  ".join(
            f"{label} {statistics.median(values[WARMUP:]):6.1f} / {percentile(values[WARMUP:], 0.9):6.1f}"
            for label, values in times.items()))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["_publish"]:
        row, rate, frames, socket_name = args[1:]
        return publish(row, float(rate), int(frames), socket_name)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=30.0, help="frames per second (default 30)")
    parser.add_argument("--count", type=int, default=300, help=f"measured frames per row, after {WARMUP} warm-up")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--executor", choices=["single", "events"], default="single",
                        help="the rows' executor: a timed SingleThreadedExecutor, or rclpy.experimental's "
                             "EventsExecutor (C++; its wake, take and dispatch are then one step)")
    parser.add_argument("--bare-node", action="store_true",
                        help="the subscriber's node without parameter services and rosout (fewer entities to wait on)")
    parser.add_argument("--conversions", action="store_true",
                        help="also time serialize_message / deserialize_message / construction per message type, "
                             "one call per frame period in this process")
    parser.add_argument("--json", help="write every frame's stamps here")
    options = parser.parse_args(args)
    if not 0 < options.rate < math.inf or options.count < 1:  # nan and inf too: the ticks would be nan or 0 s
        parser.error("--rate must be a positive finite number and --count positive")
    if options.executor == "events" and any(row.startswith("socket") for row in options.rows):
        parser.error("the EventsExecutor takes no guard conditions (\"Guard conditions not supported\"): "
                     "give it dds rows only")
    print(f"rate {options.rate:g} Hz, {options.count} frames a row, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}, RMW {os.environ.get('RMW_IMPLEMENTATION', 'default')}, "
          f"FASTDDS_BUILTIN_TRANSPORTS={os.environ.get('FASTDDS_BUILTIN_TRANSPORTS', 'default')}, "
          f"executor {options.executor}")
    results = {}
    for row in options.rows:
        marks, published = receive(row, options.rate, options.count, options.executor == "events", options.bare_node)
        rows = frame_stamps(marks, published)
        print_split(row, split(rows, row), marks.twins)
        if marks.dds_first:
            print(f"  DDS twins that ran before their fast-path frame: {marks.dds_first}")
        missing = options.count + WARMUP - len(marks.frames)
        if missing:
            print(f"  frames not received: {missing}")
        results[row] = rows
    if options.conversions:
        print_conversions(options.rate, options.count)
    if options.json:
        with open(options.json, "w") as out:
            json.dump(results, out)
    return 0


if __name__ == "__main__":
    from ros2_cuda_ipc_core import run_tool

    raise SystemExit(run_tool(main))
