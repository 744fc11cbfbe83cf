"""Python-side cost per message on a warm cache, in microseconds.

    python -m ros2_cuda_ipc_core.measure_cost [--memory host|cuda] [--count 20000]

Measures ``acquire_for_publish`` + ``prepare_publish``, and ``read`` + ``close`` through the
cross-process path (a child process owns the pool; we import it over its socket once) and
through the same-process path.  Not a test.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .pool import BlockManager, MemoryKind
from .publish_block import PublishBlock
from .reader import Reader


def _time_per_call(fn: Callable[[], object], count: int) -> float:
    """Median over 5 batches of the per-call time, in microseconds."""
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(count // 5):
            fn()
        batches.append((time.perf_counter() - started) / (count // 5) * 1e6)
    return statistics.median(batches)


def _acquire(pool: BlockManager) -> PublishBlock:
    block = pool.acquire_for_publish(timeout=1.0)
    if block is None:
        raise RuntimeError(f"no free block in a pool nobody reads: {pool.stats()}")
    return block


def _serve_one_block(memory: MemoryKind, conn: Connection) -> None:
    """Child process: own a pool, publish one block, hand its descriptor over, wait to be told to stop."""
    from rclpy.serialization import serialize_message

    with BlockManager(1 << 20, block_count=4, memory=memory, reuse_delay=0) as pool:
        conn.send_bytes(serialize_message(_acquire(pool).prepare_publish()))
        conn.recv_bytes()


def measure(memory: MemoryKind, count: int) -> dict[str, float]:
    from rclpy.serialization import deserialize_message

    from ros2_cuda_ipc_msgs.msg import BufferCore

    with BlockManager(1 << 20, block_count=4, memory=memory, reuse_delay=0) as pool:
        def publish_once() -> Any:
            return _acquire(pool).prepare_publish()

        publish_us = _time_per_call(publish_once, count)
        core = publish_once()
        reader = Reader()
        reader.read(core).close()  # same-process import
        same_us = _time_per_call(lambda: reader.read(core).close(), count)

    ours, theirs = multiprocessing.get_context("spawn").Pipe()
    child = multiprocessing.get_context("spawn").Process(target=_serve_one_block, args=(memory, theirs))
    child.start()
    try:
        remote_core = deserialize_message(ours.recv_bytes(), BufferCore)
        remote = Reader()
        remote.read(remote_core).close()  # import over the socket, once
        remote_us = _time_per_call(lambda: remote.read(remote_core).close(), count)
    finally:
        ours.send_bytes(b"stop")
        child.join()
    return {"acquire+prepare_publish": publish_us, "read+close (cross-process path)": remote_us,
            "read+close (same-process path)": same_us}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory", choices=["host", "cuda"], default="host")
    parser.add_argument("--count", type=int, default=20000)
    args = parser.parse_args(argv)
    for name, micros in measure(args.memory, args.count).items():
        print(f"{args.memory:5} {name:34} {micros:7.1f} us", flush=True)


if __name__ == "__main__":
    main()
