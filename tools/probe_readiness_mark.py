"""What a CUDA publication's readiness mark costs the publisher's CPU, call by call, at a camera's rate.

    python tools/probe_readiness_mark.py [--rate 30] [--count 200]

``profile_publish.py`` found the mark (``cuStreamWriteValue64`` into the block's timeline slot, then an event
record) the largest step before a publish's DDS write, the write alone 45-63 us on an H100. This probe asks
why, on a timeline pool's own slot: each variant below runs ``--count`` ticks at ``--rate``, idle in between,
after a fill of the producer's stream that it synchronized (as the benchmark's camera does), and times each call:

  write, record   the write then an event record (the publisher before session 14)
  record, write   the same two calls the other way round: is the first call's time its own or the cold start's?
  write           the write alone (the publisher since session 14 on a timeline pool)
  query, write    ``cuStreamQuery`` first: what knowing that the stream is idle would cost
  write, kept     the write with its stream and address wrapped once, not per call
  write, ctypes   the write straight into libcuda through ctypes: what cuda-python's wrapper costs

A developer's probe: nothing here is imported by the packages. Ctrl-C ends it with exit status 0.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from step_timer import at_rate, print_table


def probe(rate: float, count: int) -> None:
    from cuda.bindings import driver as cu

    from ros2_cuda_ipc_core import BlockManager
    from ros2_cuda_ipc_core.memory.cuda_context import on_device
    from ros2_cuda_ipc_core.memory.cuda_driver import driver_call

    with BlockManager(1 << 20, block_count=2, memory="cuda") as pool, on_device(0):
        timeline = pool._memory._timeline[0]  # a probe of the private slot, by design
        if timeline is None:
            sys.exit("this pool signals by events: nothing to probe (see its warning)")
        address = timeline._device_address + timeline._slot(0)
        stream = driver_call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        event = driver_call(cu.cuEventCreate, cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        scratch = driver_call(cu.cuMemAlloc, 1 << 20)
        libcuda = ctypes.CDLL("libcuda.so.1")
        raw_write = libcuda.cuStreamWriteValue64_v2
        raw_write.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
        kept_stream, kept_address = cu.CUstream(int(stream)), cu.CUdeviceptr(address)
        flags = cu.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT
        value = [0]

        def write() -> None:
            value[0] += 1
            driver_call(cu.cuStreamWriteValue64, stream, address, value[0], flags)

        def record() -> None:
            driver_call(cu.cuEventRecord, event, stream)

        def query() -> None:
            cu.cuStreamQuery(stream)

        def write_kept() -> None:
            value[0] += 1
            driver_call(cu.cuStreamWriteValue64, kept_stream, kept_address, value[0], flags)

        def write_ctypes() -> None:
            value[0] += 1
            if raw_write(int(stream), address, value[0], 0) != 0:
                raise RuntimeError("cuStreamWriteValue64_v2 failed")

        variants: dict[str, list[tuple[str, Callable[[], None]]]] = {
            "write, record": [("cuStreamWriteValue64", write), ("cuEventRecord", record)],
            "record, write": [("cuEventRecord", record), ("cuStreamWriteValue64", write)],
            "write": [("cuStreamWriteValue64", write)],
            "query, write": [("cuStreamQuery", query), ("cuStreamWriteValue64", write)],
            "write, kept": [("cuStreamWriteValue64 (stream, address wrapped once)", write_kept)],
            "write, ctypes": [("cuStreamWriteValue64_v2 (ctypes)", write_ctypes)],
        }

        def fill(index: int) -> int:
            driver_call(cu.cuMemsetD8Async, scratch, index & 255, 1 << 20, stream)
            driver_call(cu.cuStreamSynchronize, stream)
            return index

        for name, calls in variants.items():
            def frame(_: Any, calls: list[tuple[str, Callable[[], None]]] = calls) -> dict[str, float]:
                times = {}
                for label, call in calls:
                    start = time.perf_counter_ns()
                    call()
                    times[label] = (time.perf_counter_ns() - start) / 1000
                return times

            rows = at_rate(rate, count, frame, prepare=fill)
            print_table(rows, f"{name}: {count} ticks at {rate:g} Hz after a synchronized fill")
        driver_call(cu.cuStreamSynchronize, stream)
        cu.cuMemFree(scratch)
        cu.cuEventDestroy(event)
        cu.cuStreamDestroy(stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=30.0, help="ticks a second (default 30)")
    parser.add_argument("--count", type=int, default=200, help="ticks a variant, after the warm-up (default 200)")
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        probe(args.rate, args.count)
    except KeyboardInterrupt:
        print("interrupted: the variants above are complete, the rest did not run", file=sys.stderr)


if __name__ == "__main__":
    main()
