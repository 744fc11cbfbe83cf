"""Real GPU processes for test_cuda.py (``cuda_peer.py ROLE ARGS...``).  Each role prints one JSON line at the end.

  gpu-publisher COUNT SUBSCRIBERS SPIN_MS   fill 1080p RGBA frames with a CUDA kernel, publish over DDS
  gpu-subscriber NAME torch|cupy COUNT      verify every frame on the GPU through torch or cupy DLPack
  gpu-subscriber-across NAME torch|cupy COUNT DEVICE MODE   the same with streams on DEVICE, Reader(cross_device=MODE)
  gpu-hold                                  read the descriptor on stdin, print, hold the lease until killed
  gpu-publish-and-wait                      publish two CUDA blocks of known bytes, print them, wait
  gpu-write-readonly                        read the descriptor on stdin and try to write through the view
  gpu-read-each                             read-each of core_peer on CUDA: cupy reads, then counts and stats
  gpu-fault-then-close                      publish behind a kernel that faults, then close the pool: how long it took
"""

import json
import os
import sys
import time

import cupy
import numpy as np
from core_peer import acking_subscriber, core_from_json, core_to_json, flow_controlled_publisher, resource_counts
from peers import play

from ros2_cuda_ipc_core import BlockManager, Reader

WIDTH, HEIGHT, CHANNELS = 1920, 1080, 4
FRAME_BYTES = WIDTH * HEIGHT * CHANNELS

_KERNELS = cupy.RawModule(code=r"""
extern "C" __global__ void fill(unsigned char* out, long long n, long long seq) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (unsigned char)((i * 31 + seq * 7) & 255);
}
extern "C" __global__ void spin(long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < nanoseconds);
}
extern "C" __global__ void spin_then_fault(long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < nanoseconds);
    *(volatile int*)16 = 1;  /* an illegal address: the context's error is sticky, its queued work never runs */
}
""")


def fill_on(stream: cupy.cuda.Stream, ptr: int, n: int, seq: int, spin_ms: float = 0) -> None:
    with stream:
        if spin_ms:
            _KERNELS.get_function("spin")((1,), (1,), (np.int64(spin_ms * 1e6),))
        _KERNELS.get_function("fill")(((n + 255) // 256,), (256,), (ptr, np.int64(n), np.int64(seq)))


def gpu_publisher(count: str, subscribers: str, spin_ms: str, sync: str = "auto") -> dict:
    if sync == "events":  # as on a driver without stream memory operations
        os.environ["ROS2_CUDA_IPC_SYNC"] = "events"
    pool = BlockManager(FRAME_BYTES, block_count=4, memory="cuda", reuse_delay=0)
    stream = cupy.cuda.Stream(non_blocking=True)
    spin = float(spin_ms)

    def fill(block, seq, extra):
        fill_on(stream, block.device_ptr, FRAME_BYTES, seq, spin)
        # prepare_publish only enqueues the readiness mark: the host does not wait for the kernel.
        extra["published_before_done"] = extra.get("published_before_done", 0) + (not stream.done)
        extra["sync"] = pool.header.sync
        return stream

    return flow_controlled_publisher(pool, int(count), int(subscribers), fill, "cuda_test")


def _expected(xp, n: int, seq: int, device):
    index = xp.arange(n, dtype=xp.int64) if device is None else xp.arange(n, dtype=xp.int64, device=device)
    return ((index * 31 + seq * 7) & 255).astype(xp.uint8) if device is None else ((index * 31 + seq * 7) & 255).to(xp.uint8)


def gpu_subscriber(name: str, framework: str, count: str) -> dict:
    if framework == "torch":
        import torch

        stream = torch.cuda.Stream()  # a non-default stream

        def check(reader, core, seq, result):
            with reader.read(core, stream) as handle, torch.cuda.stream(stream):
                frame = torch.from_dlpack(handle.view((HEIGHT, WIDTH, CHANNELS), np.uint8))
                result["zero_copy"] = result.get("zero_copy", True) and frame.data_ptr() == handle.device_ptr
                result["shape_ok"] = tuple(frame.shape) == (HEIGHT, WIDTH, CHANNELS)
                wrong = int((frame.reshape(-1) != _expected(torch, FRAME_BYTES, seq, frame.device)).sum().item())
                del frame
            return f"frame {seq}: {wrong} wrong bytes" if wrong else None
    else:
        stream = cupy.cuda.Stream(non_blocking=True)

        def check(reader, core, seq, result):
            with reader.read(core, stream) as handle, stream:
                frame = cupy.from_dlpack(handle.view((HEIGHT, WIDTH, CHANNELS), np.uint8))
                result["zero_copy"] = result.get("zero_copy", True) and frame.data.ptr == handle.device_ptr
                wrong = int((frame.reshape(-1) != _expected(cupy, FRAME_BYTES, seq, None)).sum().get())
                del frame
            return f"frame {seq}: {wrong} wrong bytes" if wrong else None

    return acking_subscriber(name, int(count), check, "cuda_test")


def gpu_subscriber_across(name: str, framework: str, count: str, device: str, mode: str) -> dict:
    """Every frame of a pool on another GPU, read with streams on ``device``: in place (peer) or copied."""
    dev = int(device)
    if framework == "torch":
        import torch

        torch.cuda.set_device(dev)
        stream = torch.cuda.Stream(device=dev)

        def as_tensor(view):
            return torch.from_dlpack(view)

        def wrong_bytes(frame, seq):
            return int((frame.reshape(-1) != _expected(torch, FRAME_BYTES, seq, frame.device)).sum().item())

        def data_ptr(frame):
            return frame.data_ptr()

        def on_stream():
            return torch.cuda.stream(stream)

        def on_device(frame):
            return frame.device.index
    else:
        cupy.cuda.Device(dev).use()
        stream = cupy.cuda.Stream(non_blocking=True)

        def as_tensor(view):
            return cupy.from_dlpack(view)

        def wrong_bytes(frame, seq):
            return int((frame.reshape(-1) != _expected(cupy, FRAME_BYTES, seq, None)).sum().get())

        def data_ptr(frame):
            return frame.data.ptr

        def on_stream():
            return stream

        def on_device(frame):
            return frame.device.id

    def check(reader, core, seq, result):
        with reader.read(core, stream) as handle, on_stream():
            frame = as_tensor(handle.view((HEIGHT, WIDTH, CHANNELS), np.uint8))
            pool_address = handle._pool.memory.address(handle.block_id * handle._pool.header.block_size)
            result["in_place"] = result.get("in_place", True) and data_ptr(frame) == pool_address
            result["devices"] = sorted({*result.get("devices", []), on_device(frame), handle.device})
            wrong = wrong_bytes(frame, seq)
            del frame
        return f"frame {seq}: {wrong} wrong bytes" if wrong else None

    return acking_subscriber(name, int(count), check, "cuda_test", Reader(cross_device=mode))


def gpu_hold() -> None:
    core = core_from_json(sys.stdin.readline())
    handle = Reader().read(core, cupy.cuda.Stream(non_blocking=True))
    print(json.dumps({"held": handle.block_id}), flush=True)
    time.sleep(600)


def gpu_publish_and_wait() -> None:
    pool = BlockManager(FRAME_BYTES, block_count=2, memory="cuda", reuse_delay=0)
    stream = cupy.cuda.Stream(non_blocking=True)
    for seq in (5, 6):
        block = pool.acquire_for_publish()
        fill_on(stream, block.device_ptr, FRAME_BYTES, seq)
        print(core_to_json(block.prepare_publish(stream)), flush=True)
    time.sleep(600)


def gpu_read_each() -> None:
    reader = Reader(liveness_interval=0)
    stream = cupy.cuda.Stream(non_blocking=True)
    for line in sys.stdin:
        first = None
        if line.strip():
            with reader.read(core_from_json(line), stream) as handle, stream:
                first = int(cupy.from_dlpack(handle.view((1,), np.uint8))[0].get())
        deadline = time.monotonic() + 5
        while reader.stats()["leases_held"] and time.monotonic() < deadline:
            time.sleep(0.001)  # CUDA leases go back on the release thread
        print(json.dumps({"first": first, **resource_counts(), **reader.stats()}), flush=True)


def gpu_write_readonly() -> None:
    core = core_from_json(sys.stdin.readline())
    stream = cupy.cuda.Stream(non_blocking=True)
    handle = Reader().read(core, stream)
    view = handle.view((FRAME_BYTES,), np.uint8)
    outcome = {"enforced": handle._pool.memory.readonly_enforced}
    try:
        fill_on(stream, view.ptr, FRAME_BYTES, 99)
        stream.synchronize()
        outcome["write"] = "succeeded"
    except Exception as exc:  # the mapping refused the write: the context is now unusable, as expected
        outcome["write"] = f"failed: {type(exc).__name__}: {exc}"
    print(json.dumps(outcome), flush=True)


def gpu_fault_then_close() -> dict:
    pool = BlockManager(FRAME_BYTES, block_count=2, memory="cuda")
    stream = cupy.cuda.Stream(non_blocking=True)
    block = pool.acquire_for_publish()
    with stream:
        _KERNELS.get_function("spin_then_fault")((1,), (1,), (np.int64(200_000_000),))
    block.prepare_publish(stream)  # enqueued before the fault: its slot write is queued behind it
    try:
        stream.synchronize()
        faulted = "no fault"
    except Exception as exc:
        faulted = f"{type(exc).__name__}: {exc}"
    start = time.monotonic()
    try:
        pool.close()
        closed = "ok"
    except Exception as exc:
        closed = f"{type(exc).__name__}: {exc}"
    return {"sync": pool.header.sync, "fault": faulted, "closed": closed, "closed_in": time.monotonic() - start}


if __name__ == "__main__":
    play({"gpu-publisher": gpu_publisher, "gpu-subscriber": gpu_subscriber,
          "gpu-subscriber-across": gpu_subscriber_across, "gpu-hold": gpu_hold,
          "gpu-publish-and-wait": gpu_publish_and_wait, "gpu-write-readonly": gpu_write_readonly,
          "gpu-read-each": gpu_read_each, "gpu-fault-then-close": gpu_fault_then_close})
