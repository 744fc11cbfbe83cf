"""Real processes of the direct path's red-team tests (``direct_peer.py ROLE ARGS...``), host pools, toy records.

Genuine ends (each answers a command line on stdin with one JSON line):

  publisher TOPIC              a TypedPublisher of typed_cloud records.  ``match N``; ``send SEQ [FRAME_ID_BYTES]
                               [FIELDS]`` (one frame named main-SEQ, its frame_id padded to FRAME_ID_BYTES, with
                               FIELDS named PointFields in its message); ``rate SECONDS`` (publishes a second, as
                               fast as blocks are free, and this process's CPU µs a publish); ``paced SECONDS HZ``
                               (frames at HZ); ``stats``; ``quit``.
                               Its first line names its socket.
  subscriber TOPIC DELIVERY N  N TypedSubscriptions of the topic in one node.  ``seen`` (the main-SEQ numbers
                               each saw, its stats, the p50 of stamp-to-callback in ms); ``quit``.

Hostile ends (they print one JSON line when set up, then on a line from stdin end, saying so):

  silent SOCKET TOPIC N PROCS   N direct channels over PROCS processes (forked), none ever read
  garbage SOCKET TOPIC          one channel, then forged records sent up it as fast as it takes them
  malformed SOCKET              three malformed requests and a valid one in two writes: which were closed at once
  stall TOPIC N HZ              N bound pool-named sockets that never answer, and forged descriptors naming them at HZ
  flood_pool TOPIC SECONDS      a pool of its own announced on TOPIC, whose direct channel then floods forged frames
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import statistics
import sys
import threading
import time
from typing import Any

import numpy as np
import rclpy
from peers import peer_node, play
from sensor_msgs.msg import PointField
from std_msgs.msg import Header
from typed_cloud import POINT_STEP, RecordLayout, RecordReader

from ros2_cuda_ipc_core import TypedPublisher, TypedSubscription
from ros2_cuda_ipc_core.direct.wire import frame_record, subscribe_request, template_record
from ros2_cuda_ipc_core.memory.layout import HEADER_SIZE
from ros2_cuda_ipc_core.pool.descriptor import socket_address
from ros2_cuda_ipc_core.pool.socket_names import pool_socket_path
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

QOS = 100
LAYOUT = RecordLayout(4, 64, row_step=64 * POINT_STEP)


class FieldsLayout(RecordLayout):
    """The records' layout, its message also carrying ``count`` named PointFields (a template too large to send)."""

    def __init__(self, count: int) -> None:
        super().__init__(LAYOUT.height, LAYOUT.width, LAYOUT.row_step)
        object.__setattr__(self, "count", count)

    def fill_message(self, msg: Any) -> None:
        super().fill_message(msg)
        msg.fields = [PointField(name=f"field_{i:05d}_{'n' * 32}", offset=0, datatype=PointField.FLOAT32, count=1)
                      for i in range(self.count)]


def answer(**what: Any) -> None:
    print(json.dumps(what), flush=True)


def commands(node: Any) -> Any:
    """Lines from stdin, split, while the node spins."""
    while True:
        if select.select([sys.stdin], [], [], 0)[0]:
            line = sys.stdin.readline()
            if not line:
                return
            yield line.split()
        else:
            rclpy.spin_once(node, timeout_sec=0.01)


def publisher(topic: str) -> None:
    with peer_node("direct_red_team_publisher") as node, \
            TypedPublisher(node, topic, GpuPointCloud2, LAYOUT, memory="host", block_count=8, qos=QOS,
                           reuse_delay=0) as pub:
        answer(socket=pub.pool.socket_path, pid=os.getpid())

        def publish(name: str, layout: RecordLayout = LAYOUT) -> bool:
            block = pub.pool.acquire_for_publish(0.05)
            if block is None:
                return False
            with block:
                header = Header(frame_id=name)
                header.stamp = node.get_clock().now().to_msg()
                pub.publish_block(block, layout, header=header)
            return True

        for command, *args in commands(node):
            if command == "match":
                deadline = time.monotonic() + 60
                while pub.subscription_count < int(args[0]) and time.monotonic() < deadline:
                    rclpy.spin_once(node, timeout_sec=0.05)
                answer(matched=pub.subscription_count)
            elif command == "send":
                seq, length, fields = int(args[0]), *(int(a) for a in (args[1:] or ["0", "0"]))
                name = f"main-{seq}-"
                try:
                    ok = publish(name + "x" * max(0, length - len(name)), FieldsLayout(fields) if fields else LAYOUT)
                    answer(ok=ok)
                except Exception as exc:  # what the test is about: a publish that raised
                    answer(ok=False, error=f"{type(exc).__name__}: {exc}")
            elif command in ("rate", "paced"):
                period = 1.0 / float(args[1]) if command == "paced" else 0.0
                end = time.monotonic() + float(args[0])
                sent, cpu = 0, time.process_time()
                while time.monotonic() < end:
                    sent += publish(f"flood-{sent}-")
                    if period:
                        rclpy.spin_once(node, timeout_sec=period)
                answer(per_second=sent / float(args[0]), cpu_us=(time.process_time() - cpu) / max(sent, 1) * 1e6,
                       stats=plain(pub.pool.stats()))
            elif command == "stats":
                answer(stats=plain(pub.pool.stats()))
            elif command == "quit":
                answer(stats=plain(pub.pool.stats()))
                return


def plain(stats: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in stats.items() if key != "holders"}


def subscriber(topic: str, delivery: str, count: str = "1") -> None:
    lock = threading.Lock()
    with peer_node("direct_red_team_subscriber") as node:
        seen: list[list[int]] = []
        latency: list[float] = []
        subs = []
        for index in range(int(count)):
            seen.append([])

            def on_frame(view: Any, mine: list[int] = seen[index]) -> None:
                now = node.get_clock().now().nanoseconds
                stamp = view.header.stamp.sec * 10**9 + view.header.stamp.nanosec
                name = view.header.frame_id
                view.close()
                with lock:
                    latency.append((now - stamp) / 1e6)
                    if name.startswith("main-"):
                        mine.append(int(name.split("-")[1]))

            subs.append(TypedSubscription(node, topic, GpuPointCloud2, RecordReader(), None, on_frame, QOS,
                                          delivery=delivery))  # type: ignore[arg-type]
        answer(ready=True)
        for command, *_ in commands(node):
            with lock:
                got = [list(s) for s in seen]
                p50 = statistics.median(latency) if latency else None
                frames = len(latency)
                latency.clear()
            answer(seen=got, p50_ms=p50, frames=frames, stats=[s.stats() for s in subs])
            if command == "quit":
                break
        for sub in subs:
            sub.close()


# --- hostile ---------------------------------------------------------------------------------------------------

def channel(path: str, topic: str) -> socket.socket | None:
    """A connection that took its handout and asked for ``topic``; None if the pool refused the handout."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(socket_address(path))
    _, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
    for fd in fds:
        os.close(fd)
    if not fds:
        sock.close()
        return None
    sock.sendall(subscribe_request(topic))
    return sock


def silent(path: str, topic: str, count: str, procs: str) -> dict[str, bool]:
    """``count`` channels, never read, over ``procs`` processes; says how many each got, waits for stdin."""
    per, children = int(count) // int(procs), []
    for _ in range(int(procs) - 1):
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read_end)
            held = [s for s in (channel(path, topic) for _ in range(per)) if s is not None]
            os.write(write_end, f"{len(held)}\n".encode())
            signal.pause()  # until killed
            os._exit(0)
        os.close(write_end)
        children.append((child, read_end))
    held = [s for s in (channel(path, topic) for _ in range(per)) if s is not None]
    opened = [len(held)] + [int(os.read(fd, 64)) for _, fd in children]
    answer(opened=sum(opened), pids=[os.getpid()] + [pid for pid, _ in children])
    sys.stdin.readline()
    for pid, _ in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return {"done": True}


def garbage(path: str, topic: str) -> dict[str, bool]:
    """A channel that sends forged records up to the pool until the pool closes it."""
    sock = channel(path, topic)
    assert sock is not None
    forged = b"".join(frame_record(1, block, 10**6 + block, 4096, 0, 0, bytes(64), b"forged") for block in range(64))
    forged += template_record(1, b"\0" * 200)
    sent, started = 0, time.monotonic()
    sock.settimeout(10)
    try:
        while time.monotonic() - started < 10:
            sock.sendall(forged)
            sent += 65
    except OSError as exc:
        answer(sent=sent, ended=type(exc).__name__, seconds=time.monotonic() - started)
    else:
        answer(sent=sent, ended=None, seconds=time.monotonic() - started)
    sys.stdin.readline()
    return {"done": True}


def malformed(path: str) -> dict[str, bool]:
    """Three malformed requests and one valid request in two writes: which the pool closed, and how soon."""
    request = subscribe_request("/split")
    junk = {"http": b"GET / HTTP/1.0\r\n\r\n", "too_long": request + b"x", "zero_topic": b"R2CD\x01\x00\x00\x00"}
    socks = {name: channel_raw(path) for name in (*junk, "split")}
    started = time.monotonic()
    for name, data in junk.items():
        socks[name].sendall(data)
    socks["split"].sendall(request[:6])
    time.sleep(0.2)
    socks["split"].sendall(request[6:])
    closed = {}
    for name, sock in socks.items():
        ready = select.select([sock], [], [], 3.0)[0]
        try:
            closed[name] = bool(ready) and sock.recv(1) == b""
        except ConnectionResetError:
            closed[name] = True
    answer(closed=closed, seconds=time.monotonic() - started)
    sys.stdin.readline()
    return {"done": True}


def channel_raw(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(socket_address(path))
    _, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE + 1, 3)
    for fd in fds:
        os.close(fd)
    return sock


def stall(topic: str, count: str, hz: str) -> None:
    """``count`` sockets named as this process's pools, bound and listening, that accept and never answer, and
    forged descriptors naming them in turn at ``hz`` from a DDS writer of ``topic``; on a line from stdin, how
    many connections each socket took."""
    ids = [os.urandom(16) for _ in range(int(count))]
    servers = []
    for pool_id in ids:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(socket_address(pool_socket_path(pool_id, os.getpid(), None)))
        server.listen(64)
        server.setblocking(False)
        servers.append(server)
    connections = [0] * len(servers)
    held: list[socket.socket] = []
    with peer_node("direct_red_team_stall") as node:
        writer = node.create_publisher(GpuPointCloud2, topic, QOS)
        answer(sockets=len(servers))
        period, forged, next_at = 1.0 / float(hz), 0, time.monotonic()
        while not select.select([sys.stdin], [], [], 0)[0]:
            for index, server in enumerate(servers):
                try:
                    while True:
                        held.append(server.accept()[0])  # kept, never answered
                        connections[index] += 1
                except BlockingIOError:
                    pass
            if time.monotonic() >= next_at:
                msg = GpuPointCloud2()
                LAYOUT.fill_message(msg)
                msg.header.frame_id = f"forged-{forged}"
                pool_id = ids[forged % len(ids)]
                msg.core.socket_path = pool_socket_path(pool_id, os.getpid(), None)
                msg.core.pool_id = np.frombuffer(pool_id, np.uint8)
                msg.core.publisher_pid = os.getpid()
                msg.core.block_id, msg.core.uid, msg.core.byte_size = 0, forged + 1, LAYOUT.padded_extent
                writer.publish(msg)
                forged += 1
                next_at += period
            rclpy.spin_once(node, timeout_sec=0.005)
        answer(connections=connections, forged=forged)


def flood_pool(topic: str, seconds: str) -> dict[str, Any]:
    """A pool of this process's own, announced on ``topic`` by one real descriptor; once a subscriber opens a direct
    channel to it, forged records (frames of uids never published) sent up that channel as fast as it takes them for
    ``seconds``; then how many, and waits for a line on stdin."""
    from rclpy.serialization import serialize_message

    from ros2_cuda_ipc_core import BlockManager

    with peer_node("direct_red_team_flood") as node, BlockManager(LAYOUT.padded_extent, block_count=2, memory="host",
                                                                  reuse_delay=0) as pool:
        writer = node.create_publisher(GpuPointCloud2, topic, QOS)
        msg = GpuPointCloud2()
        LAYOUT.fill_message(msg)
        msg.header.frame_id = "flood-announce"
        answer(socket=pool.socket_path)
        deadline = time.monotonic() + 60
        while not pool.direct.count() and time.monotonic() < deadline:  # announce until a subscriber reads it
            block = pool.acquire_for_publish(0.05)
            if block is not None:
                block.prepare_publish(into=msg.core, byte_size=LAYOUT.padded_extent)
                writer.publish(msg)
            rclpy.spin_once(node, timeout_sec=0.2)
        conn = next(iter(pool.direct._by_conn))  # the channel, written here by hand
        conn.setblocking(True)
        conn.sendall(template_record(1, serialize_message(msg)))
        uid, sent, end = 10**9, 0, time.monotonic() + float(seconds)
        try:
            while time.monotonic() < end:
                batch = b"".join(frame_record(1, 0, uid + i, LAYOUT.padded_extent, 0, 0, bytes(64), b"forged")
                                 for i in range(256))
                conn.sendall(batch)
                uid, sent = uid + 256, sent + 256
        except OSError as exc:
            answer(sent=sent, ended=type(exc).__name__)
        else:
            answer(sent=sent, ended=None)
        sys.stdin.readline()
    return {"done": True}


if __name__ == "__main__":
    play({"publisher": publisher, "subscriber": subscriber, "silent": silent, "garbage": garbage,
          "malformed": malformed, "stall": stall, "flood_pool": flood_pool})
