"""Python-side cost of the transport per message, in microseconds: tight loop, or at a camera's rate.

    python -m ros2_cuda_ipc_core.measure_cost [--memory host|cuda] [--count 20000]
    python -m ros2_cuda_ipc_core.measure_cost --rate 30 [--memory host|cuda] [--count 600]

Without ``--rate``: ``acquire_for_publish`` + ``prepare_publish``, and ``read`` + ``close`` on a warm
cache in a tight loop, through the cross-process path (a child process owns the pool; we import it
over its socket once) and the same-process path (median of 5 batches).

With ``--rate HZ``: the way a camera consumer runs.  A child process publishes a fresh block for
every frame; this process sleeps until the frame's tick, so it is idle between frames, then reads
it on its own stream and times each phase: ``read``, ``view`` (``ReadHandle.view``),
``__dlpack__`` (CUDA: the capsule a framework would take, for the consumer's stream) and
``release`` (drop capsule and view, close the handle).  Prints p50 / p90 / p99 per phase.
Not a test.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .node.node_cli import refuse_unusable_memory, tool_parser
from .pool.block_manager import BlockManager, MemoryKind
from .pool.reader import Reader

PHASES = ("read", "view", "__dlpack__", "release")
WARMUP_FRAMES = 10


def _time_per_call(fn: Callable[[], object], count: int) -> float:
    """Median over 5 batches of the per-call time, in microseconds."""
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(count // 5):
            fn()
        batches.append((time.perf_counter() - started) / (count // 5) * 1e6)
    return statistics.median(batches)


def _publish(pool: BlockManager) -> Any:
    block = pool.acquire_for_publish(timeout=1.0)
    if block is None:
        raise RuntimeError("no free block within 1 s: the reader holds them all")
    return block.prepare_publish()


def _serve_blocks(memory: MemoryKind, byte_size: int, conn: Connection) -> None:
    """Child process: own a pool; for every b'next', publish a fresh block and send its descriptor."""
    from rclpy.serialization import serialize_message

    with BlockManager(byte_size, block_count=4, memory=memory, reuse_delay=0) as pool:
        while conn.recv_bytes() == b"next":
            conn.send_bytes(serialize_message(_publish(pool)))


def _with_publisher(memory: MemoryKind, byte_size: int, body: Callable[[Callable[[], Any]], Any]) -> Any:
    """Run ``body(next_descriptor)`` against a publisher in a child process."""
    from rclpy.serialization import deserialize_message

    from ros2_cuda_ipc_msgs.msg import BufferCore

    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=_serve_blocks, args=(memory, byte_size, theirs))
    child.start()

    def next_descriptor() -> Any:
        ours.send_bytes(b"next")
        return deserialize_message(ours.recv_bytes(), BufferCore)

    try:
        return body(next_descriptor)
    finally:
        ours.send_bytes(b"stop")
        child.join()


def measure_tight(memory: MemoryKind, count: int) -> dict[str, float]:
    """Per-call cost in a tight loop on a warm cache (the block is read again and again)."""
    with BlockManager(1 << 20, block_count=4, memory=memory, reuse_delay=0) as pool:
        publish_us = _time_per_call(lambda: _publish(pool), count)
        core = _publish(pool)
        reader = Reader()
        reader.read(core).close()  # same-process import
        same_us = _time_per_call(lambda: reader.read(core).close(), count)

    def remote(next_descriptor: Callable[[], Any]) -> float:
        remote_core = next_descriptor()
        remote_reader = Reader()
        remote_reader.read(remote_core).close()  # import over the socket, once
        return _time_per_call(lambda: remote_reader.read(remote_core).close(), count)

    remote_us = _with_publisher(memory, 1 << 20, remote)
    return {"acquire+prepare_publish": publish_us, "read+close (cross-process path)": remote_us,
            "read+close (same-process path)": same_us}


def _consumer_stream(memory: str) -> int:
    if memory != "cuda":
        return 0
    from .memory.cuda_context import driver, on_device
    from .memory.cuda_driver import driver_call

    cu = driver()
    with on_device(0):
        return int(driver_call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING))


def measure_at_rate(memory: MemoryKind, rate: float, count: int, byte_size: int) -> dict[str, list[float]]:
    """Per-phase times (us) of ``count`` frames read ``rate`` times a second, idle in between."""
    import numpy as np

    stream = _consumer_stream(memory)
    samples: dict[str, list[float]] = {phase: [] for phase in PHASES}

    def run(next_descriptor: Callable[[], Any]) -> None:
        reader = Reader()
        period = 1.0 / rate
        tick = time.monotonic()
        for frame in range(WARMUP_FRAMES + count):
            core = next_descriptor()
            tick = max(tick + period, time.monotonic())
            time.sleep(max(0.0, tick - time.monotonic()))
            t0 = time.perf_counter_ns()
            handle = reader.read(core, stream)
            t1 = time.perf_counter_ns()
            view = handle.view((byte_size,), np.uint8)
            t2 = time.perf_counter_ns()
            capsule = view.__dlpack__(stream=stream or 1, max_version=(1, 0)) if memory == "cuda" else None
            t3 = time.perf_counter_ns()
            del capsule, view
            handle.close()
            t4 = time.perf_counter_ns()
            if frame >= WARMUP_FRAMES:
                for phase, start, end in zip(PHASES, (t0, t1, t2, t3), (t1, t2, t3, t4), strict=True):
                    samples[phase].append((end - start) / 1e3)

    _with_publisher(memory, byte_size, run)
    if memory != "cuda":
        del samples["__dlpack__"]
    return samples


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__name__, __doc__)
    parser.add_argument("--memory", choices=["host", "cuda"], default="host")
    parser.add_argument("--count", type=int, default=None,
                        help="calls (tight loop, default 20000) or frames (--rate, default 600)")
    parser.add_argument("--rate", type=float, default=None, metavar="HZ",
                        help="read one fresh frame HZ times a second, idle in between, and split the phases")
    parser.add_argument("--size-mib", type=float, default=8.0, help="frame size with --rate (default 8 MiB)")
    args = parser.parse_args(argv)
    if args.rate is not None and args.rate <= 0:
        parser.error(f"--rate must be > 0 Hz, got {args.rate:g}")
    if args.count is not None and args.count < 5:
        parser.error(f"--count must be at least 5, got {args.count}")
    if args.size_mib <= 0:
        parser.error(f"--size-mib must be > 0, got {args.size_mib:g}")
    refuse_unusable_memory(parser, args.memory)
    if args.rate is None:
        for name, micros in measure_tight(args.memory, args.count or 20000).items():
            print(f"{args.memory:5} {name:34} {micros:7.1f} us", flush=True)
        return
    count = args.count or 600
    byte_size = int(args.size_mib * (1 << 20))
    print(f"{args.memory} memory, {count} frames of {args.size_mib:g} MiB at {args.rate:g} Hz, cross-process; us",
          flush=True)
    samples = measure_at_rate(args.memory, args.rate, count, byte_size)
    samples["total"] = [sum(parts) for parts in zip(*samples.values(), strict=True)]
    print(f"{'phase':12} {'p50':>8} {'p90':>8} {'p99':>8}")
    for phase, values in samples.items():
        print(f"{phase:12} " + " ".join(f"{percentile(values, q):8.1f}" for q in (50, 90, 99)), flush=True)


if __name__ == "__main__":
    from .node.shutdown import run_tool

    raise SystemExit(run_tool(main))
