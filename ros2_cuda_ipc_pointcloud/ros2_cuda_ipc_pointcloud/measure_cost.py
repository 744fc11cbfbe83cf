"""Python-side cost of reading a point cloud, per message, on a warm cache, in microseconds.

    python -m ros2_cuda_ipc_pointcloud.measure_cost [--memory host|cuda] [--count 20000]

A child process owns an Ouster-layout publisher (128 x 1024 points of 48 bytes) and publishes one
cloud; this process times ``PointCloudReader.read`` plus three ``field()`` views (x, intensity, ring)
and ``close`` of that message, through the cross-process path, after one warm-up read: the CPU time of this
process (the Python cost, whatever else the machine runs) and the wall time.  Not a test.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from ros2_cuda_ipc_core import refuse_unusable_memory, run_tool, tool_parser


def median_micros(call: Callable[[], object], count: int) -> tuple[float, float]:
    """Median over 5 batches of the CPU time and of the wall time one call takes, in microseconds.

    CPU time (this process's) is the Python cost itself; wall time also counts waiting for a busy CPU.
    """
    cpu, wall = [], []
    for _ in range(5):
        started, started_cpu = time.perf_counter(), time.process_time()
        for _ in range(count // 5):
            call()
        cpu.append((time.process_time() - started_cpu) / (count // 5) * 1e6)
        wall.append((time.perf_counter() - started) / (count // 5) * 1e6)
    return statistics.median(cpu), statistics.median(wall)


def _publish_one_cloud(memory: str, conn: Connection) -> None:
    """Child process: publish one Ouster cloud, hand its message over, wait to be told to stop."""
    import rclpy
    from rclpy.serialization import serialize_message

    from .publisher import PointCloudPublisher

    rclpy.init()
    node = rclpy.create_node("pointcloud_cost_publisher")
    with PointCloudPublisher(node, "pointcloud_cost", fields="ouster", width=1024, height=128,
                             memory=memory) as pub:  # type: ignore[arg-type]
        conn.send_bytes(serialize_message(pub.borrow().publish()))  # type: ignore[union-attr]
        conn.recv_bytes()
    node.destroy_node()
    rclpy.try_shutdown()


def measure(memory: str, count: int) -> dict[str, tuple[float, float]]:
    from rclpy.serialization import deserialize_message

    from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

    from .reader import PointCloudReader

    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=_publish_one_cloud, args=(memory, theirs))
    child.start()
    try:
        msg = deserialize_message(ours.recv_bytes(), GpuPointCloud2)
        reader = PointCloudReader()

        def read_only() -> None:
            reader.read(msg).close()

        def read_three_fields() -> None:
            with reader.read(msg) as view:
                view.field("x")
                view.field("intensity")
                view.field("ring")

        read_three_fields()  # import the pool over its socket, once
        return {"read+close": median_micros(read_only, count),
                "read+3 field views+close": median_micros(read_three_fields, count)}
    finally:
        ours.send_bytes(b"stop")
        child.join()


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__name__, __doc__)
    parser.add_argument("--memory", choices=["host", "cuda"], default="host")
    parser.add_argument("--count", type=int, default=20000)
    args = parser.parse_args(argv)
    if args.count < 5:
        parser.error("--count must be at least 5")
    refuse_unusable_memory(parser, args.memory)  # else its child dies of it while this process waits on a socket

    def report() -> None:
        for name, (cpu, wall) in measure(args.memory, args.count).items():
            print(f"{args.memory:5} {name:26} {cpu:7.1f} us CPU ({wall:.1f} us wall)", flush=True)

    raise SystemExit(run_tool(report))


if __name__ == "__main__":
    main()
