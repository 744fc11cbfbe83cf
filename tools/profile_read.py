"""Where a read's time goes at a camera's rate: a developer's profile, not part of the packages.

    python tools/profile_read.py steps [--memory cuda] [--rate 30] [--count 300] [--torch]
    python tools/profile_read.py calls [--rate 30] [--count 40]
    python tools/profile_read.py floor [--memory cuda] [--rate 30] [--count 300]

``steps``: the loop of ``measure_cost --rate`` with a timing wrapper around each step of the read
path (library functions and the ``cuda.bindings`` driver calls it makes); prints, per step, the
calls per frame and the p50 of its per-frame time (inclusive; each wrapper adds ~0.2-1 us).
``calls``: one operation per frame after the idle gap (an empty statement, each driver call and
system call the read path makes), to price each when it runs cold.
``floor``: the same system and driver calls as a read and its release, in one flat function: what
the read path costs with no library Python around them.

It wraps private names by design (it is a profiler); nothing here is imported by the packages.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from step_timer import at_rate, frame_ns, print_table, timed, wrap_attribute

from ros2_cuda_ipc_core import Reader, stats
from ros2_cuda_ipc_core.measure_cost import _consumer_stream, _with_publisher, percentile
from ros2_cuda_ipc_core.memory import cuda_array, cuda_context, cuda_memory, cuda_releaser, layout, views
from ros2_cuda_ipc_core.pool import descriptor, imported_pool, leases, read_handle, reader

DRIVER_CALLS = ("cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuStreamGetDevice",
                "cuEventQuery", "cuStreamWaitEvent", "cuStreamQuery", "cuEventRecord")


def instrument(memory: str) -> None:
    targets = [
        (descriptor.Descriptor, "from_message"), (reader, "require_cuda"), (reader, "stream_handle"),
        (reader.Reader, "_drop_dead_pools"), (reader.Reader, "_pool_for"),
        (imported_pool.ImportedPool, "check"), (imported_pool.ImportedPool, "lease"),
        (imported_pool.ImportedPool, "publisher_alive"),
        (imported_pool.ImportedPool, "release_after"), (imported_pool.ImportedPool, "release"),
        (leases.LeaseFile, "try_read"), (leases.LeaseFile, "release"), (leases.LeaseFile, "held_by_others"),
        (layout.Metadata, "uid"), (stats.Counters, "add"),
        (read_handle.ReadHandle, "__init__"), (read_handle.ReadHandle, "view"), (read_handle.ReadHandle, "close"),
        (read_handle, "when_collected"), (views, "check_layout"),
    ]
    if memory == "cuda":
        targets += [
            (cuda_memory.ImportedCudaMemory, "wait_ready"), (cuda_memory.ImportedCudaMemory, "_ready_event"),
            (cuda_memory.ImportedCudaMemory, "view"), (cuda_memory.ImportedCudaMemory, "_order_after"),
            (cuda_memory.ImportedCudaMemory, "release_after"), (cuda_memory, "stream_device"),
            (cuda_memory, "wait_unless_done"), (cuda_memory, "when_collected"),
            (cuda_context.on_device, "__init__"), (cuda_context.on_device, "__enter__"),
            (cuda_context.on_device, "__exit__"), (cuda_releaser.Releaser, "release_after"),
            (cuda_array.CudaArray, "__init__"), (cuda_array.CudaArray, "__dlpack__"), (cuda_array, "make_capsule"),
            (cuda_array, "check_layout"),
        ]
        from cuda.bindings import driver

        for name in DRIVER_CALLS:
            setattr(driver, name, timed(f"driver.{name}", getattr(driver, name)))
    else:
        targets += [(views, "host_array")]
    for owner, name in targets:
        label = f"{getattr(owner, '__name__', owner)}.{name}".replace("ros2_cuda_ipc_core.", "")
        wrap_attribute(owner, name, label)


def steps(memory: str, rate: float, count: int, byte_size: int, use_torch: bool, wrap: bool) -> None:
    torch_stream = None
    if use_torch:
        import torch

        torch_stream = torch.cuda.Stream()
        stream = torch_stream.cuda_stream
        torch.cuda.set_stream(torch_stream)
    else:
        stream = _consumer_stream(memory)
    if wrap:
        instrument(memory)

    def run(next_descriptor: Callable[[], Any]) -> None:
        rd = Reader()

        def frame(core: Any) -> dict[str, float]:
            frame_ns.clear()
            t0 = time.perf_counter_ns()
            handle = rd.read(core, stream)
            t1 = time.perf_counter_ns()
            view = handle.view((byte_size,), np.uint8)
            t2 = time.perf_counter_ns()
            if use_torch:
                import torch

                tensor = torch.from_dlpack(view)
            elif memory == "cuda":
                tensor = view.__dlpack__(stream=stream or 1, max_version=(1, 0))
            else:
                tensor = None
            t3 = time.perf_counter_ns()
            del tensor, view
            handle.close()
            t4 = time.perf_counter_ns()
            row = {label: ns / 1e3 for label, ns in frame_ns.items()}
            row.update({"PHASE read": (t1 - t0) / 1e3, "PHASE view": (t2 - t1) / 1e3,
                        "PHASE export": (t3 - t2) / 1e3, "PHASE release": (t4 - t3) / 1e3,
                        "PHASE total": (t4 - t0) / 1e3})
            return row

        rows.extend(at_rate(rate, count, frame, lambda _: next_descriptor()))

    rows: list[dict[str, float]] = []
    # The publisher sends the descriptor before the tick: the pipe's round trip is not in the frame's time.
    _with_publisher(memory, byte_size, run)  # type: ignore[arg-type]
    what = "torch.from_dlpack" if use_torch else "__dlpack__"
    print_table(rows, f"{memory}, {rate:g} Hz, {count} frames, export = {what}, wrappers {'on' if wrap else 'off'}")


def calls(rate: float, count: int) -> None:
    """Each operation alone, first thing after the idle gap."""
    from cuda.bindings import driver as cu

    stream = _consumer_stream("cuda")
    with cuda_context.on_device(0):
        flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
        local_event = cu.cuEventCreate(flags)[1]
        cu.cuEventRecord(local_event, stream)
        cu.cuStreamSynchronize(stream)
    path = f"/dev/shm/profile-read-{os.getpid()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"\0" * 64)
    lease = leases.LeaseFile(fd)
    ctx = cuda_context.primary_context(0)
    ops: dict[str, Callable[[], Any]] = {
        "empty statement": lambda: None,
        "time.monotonic": time.monotonic,
        "os.getpid (syscall)": os.getpid,
        "cuCtxGetCurrent": cu.cuCtxGetCurrent,
        "cuCtxPush+Pop": lambda: (cu.cuCtxPushCurrent(ctx), cu.cuCtxPopCurrent()),
        "cuStreamGetDevice": lambda: cu.cuStreamGetDevice(stream),
        "cuEventQuery (fired)": lambda: cu.cuEventQuery(local_event),
        "cuStreamWaitEvent (fired)": lambda: cu.cuStreamWaitEvent(stream, local_event, 0),
        "cuStreamQuery": lambda: cu.cuStreamQuery(stream),
        "cuEventRecord": lambda: cu.cuEventRecord(local_event, stream),
        "F_OFD_SETLK read+unlock": lambda: (lease.try_read(5), lease.release(5)),
        "F_OFD_GETLK": lambda: lease.held_by_others(6),
        "fcntl F_OFD_GETLK raw": lambda: fcntl.fcntl(fd, fcntl.F_OFD_GETLK, b"\0" * 32),
    }
    names = list(ops)
    samples: dict[str, list[float]] = {name: [] for name in names}

    def frame(index: int) -> None:
        name = names[index % len(names)]
        op = ops[name]
        t0 = time.perf_counter_ns()
        op()
        samples[name].append((time.perf_counter_ns() - t0) / 1e3)

    at_rate(rate, count * len(names), frame)
    os.unlink(path)
    print(f"\none operation per frame at {rate:g} Hz ({count} each), us")
    print(f"{'operation':32} {'p50':>8} {'p90':>8} {'min':>8}")
    for name in names:
        values = samples[name][2:]
        print(f"{name:32} {percentile(values, 50):8.1f} {percentile(values, 90):8.1f} {min(values):8.1f}")


def floor(memory: str, rate: float, count: int, byte_size: int) -> None:
    """The read's system and driver calls, flat: lease, uid, liveness, event query (+wait), release."""
    stream = _consumer_stream(memory)
    rows: list[dict[str, float]] = []

    def run(next_descriptor: Callable[[], Any]) -> None:
        rd = Reader()
        first = next_descriptor()
        rd.read(first, stream).close()  # import the pool the normal way, once
        pool = rd._last_pool
        assert pool is not None
        fd, meta = pool.leases.fd, pool.metadata
        memory_obj = pool.memory
        from cuda.bindings import driver as cu

        success = cu.CUresult.CUDA_SUCCESS
        lock = {kind: {b: leases.lock_request(kind, leases.FIRST_BLOCK_LEASE + b,
                                              os.getpid() if kind == fcntl.F_RDLCK else None) for b in range(4)}
                for kind in (fcntl.F_RDLCK, fcntl.F_UNLCK)}
        alive_request = leases.lock_request(fcntl.F_WRLCK, leases.LIVENESS_LEASE)

        def frame(core: Any) -> dict[str, float]:
            t0 = time.perf_counter_ns()
            block = core.block_id
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock[fcntl.F_RDLCK][block])
            ok = meta.uid(block) == core.uid
            fcntl.fcntl(fd, fcntl.F_OFD_GETLK, alive_request)
            if memory == "cuda":
                event = memory_obj._ready_event(block, bytes(core.event_handle))
                if cu.cuEventQuery(event)[0] != success:
                    cu.cuStreamWaitEvent(stream, event, 0)
            t1 = time.perf_counter_ns()
            if memory == "cuda":
                cu.cuStreamQuery(stream)
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock[fcntl.F_UNLCK][block])
            t2 = time.perf_counter_ns()
            assert ok
            return {"flat read": (t1 - t0) / 1e3, "flat release": (t2 - t1) / 1e3}

        rows.extend(at_rate(rate, count, frame, lambda _: next_descriptor()))

    _with_publisher(memory, byte_size, run)  # type: ignore[arg-type]
    print_table(rows, f"{memory}, {rate:g} Hz, {count} frames: the read's calls with no library code around them")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["steps", "calls", "floor"])
    parser.add_argument("--memory", choices=["host", "cuda"], default="cuda")
    parser.add_argument("--rate", type=float, default=30.0)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--size-mib", type=float, default=8.0)
    parser.add_argument("--torch", action="store_true", help="export with torch.from_dlpack on a torch stream")
    parser.add_argument("--no-wrap", action="store_true", help="steps without the wrappers (phases only)")
    args = parser.parse_args()
    byte_size = int(args.size_mib * (1 << 20))
    if args.mode == "steps":
        steps(args.memory, args.rate, args.count, byte_size, args.torch, not args.no_wrap)
    elif args.mode == "calls":
        calls(args.rate, args.count)
    else:
        floor(args.memory, args.rate, args.count, byte_size)


if __name__ == "__main__":
    main()
