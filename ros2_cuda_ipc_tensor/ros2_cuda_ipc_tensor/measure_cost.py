"""What reading a tensor costs at a camera's rate, against an image of the same bytes, in microseconds.

    python -m ros2_cuda_ipc_tensor.measure_cost [--memory host|cuda] [--rate 30] [--count 300]

A child process owns a ``TensorPublisher`` of (1, 3, 1080, 1920) float16 and an ``ImagePublisher`` of
1920x1080 rgba16 (both 12.4 MB) and publishes a fresh frame of each on request; this process sleeps until
each frame's tick (idle between frames, as a camera consumer is), then times ``read`` (the typed reader:
checks, lease, view), ``__dlpack__`` (the capsule a framework takes) and ``release``, and prints p50 / p90 /
p99 of each for both.  Not a test.
"""

from __future__ import annotations

import math
import multiprocessing
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from ros2_cuda_ipc_core import cuda_device_count, run_tool, tool_parser

PHASES = ("read", "__dlpack__", "release")
WARMUP_FRAMES = 10
TENSOR_SHAPE = (1, 3, 1080, 1920)


def _serve(memory: str, conn: Connection) -> None:
    """Child process: for every b'tensor' or b'image', publish a fresh one and send the serialized message."""
    import numpy as np
    import rclpy
    from rclpy.serialization import serialize_message

    from ros2_cuda_ipc_image import ImagePublisher

    from .publisher import TensorPublisher

    rclpy.init()
    node = rclpy.create_node("tensor_cost_publisher")
    with TensorPublisher(node, "tensor_cost", shape=TENSOR_SHAPE, dtype=np.float16, memory=memory,  # type: ignore[arg-type]
                         reuse_delay=0) as tensors, \
            ImagePublisher(node, "image_cost", width=1920, height=1080, encoding="rgba16", memory=memory,  # type: ignore[arg-type]
                           reuse_delay=0) as images:
        publishers: dict[bytes, Any] = {b"tensor": tensors, b"image": images}
        while (what := conn.recv_bytes()) in publishers:
            frame = publishers[what].borrow(timeout=1.0)
            conn.send_bytes(serialize_message(frame.publish()))
    node.destroy_node()
    rclpy.shutdown()


def _consumer_stream(memory: str) -> Any:
    """A stream of this process's own for CUDA (kept alive by the caller: it is destroyed with the object)."""
    if memory != "cuda":
        return None
    from cuda.core import Device

    device = Device(0)
    device.set_current()
    return device.create_stream()


def measure(memory: str, rate: float, count: int) -> dict[str, dict[str, list[float]]]:
    """Per-phase times (us) of ``count`` tensors and ``count`` images, read ``rate`` times a second each."""
    from rclpy.serialization import deserialize_message

    from ros2_cuda_ipc_core import Reader
    from ros2_cuda_ipc_image import ImageReader
    from ros2_cuda_ipc_msgs.msg import GpuImage, GpuTensor

    from .reader import TensorReader

    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=_serve, args=(memory, theirs))
    child.start()
    theirs.close()  # the child's end: a child that dies is then an EOFError here, not a wait for ever
    consumer = _consumer_stream(memory)
    stream = 0 if consumer is None else int(consumer.handle)
    shared = Reader()
    kinds: dict[str, tuple[bytes, type, Callable[[Any, int], Any]]] = {
        "tensor": (b"tensor", GpuTensor, TensorReader(shared).read),
        "image": (b"image", GpuImage, ImageReader(shared).read),
    }
    samples = {kind: {phase: [] for phase in PHASES} for kind in kinds}  # type: dict[str, dict[str, list[float]]]
    try:
        tick = time.monotonic()
        for frame in range(WARMUP_FRAMES + count):
            for kind, (request, message_type, read) in kinds.items():
                ours.send_bytes(request)
                msg: Any = deserialize_message(ours.recv_bytes(), message_type)
                tick = max(tick + 1.0 / rate / len(kinds), time.monotonic())
                time.sleep(max(0.0, tick - time.monotonic()))
                t0 = time.perf_counter_ns()
                view = read(msg, stream)
                t1 = time.perf_counter_ns()
                capsule = view.__dlpack__(stream=stream or 1, max_version=(1, 0)) if memory == "cuda" else \
                    view.__dlpack__(max_version=(1, 0))
                t2 = time.perf_counter_ns()
                del capsule
                view.close()
                t3 = time.perf_counter_ns()
                if frame >= WARMUP_FRAMES:
                    for phase, start, end in zip(PHASES, (t0, t1, t2), (t1, t2, t3), strict=True):
                        samples[kind][phase].append((end - start) / 1e3)
    except EOFError:
        raise SystemExit("the publishing process ended early (its error is above)") from None
    finally:
        if child.is_alive():
            ours.send_bytes(b"stop")
        child.join()
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__name__, __doc__)
    parser.add_argument("--memory", choices=["host", "cuda"], default="host")
    parser.add_argument("--rate", type=float, default=30.0, metavar="HZ", help="frames a second of each (default 30)")
    parser.add_argument("--count", type=int, default=300, help="frames of each kind measured (default 300)")
    args = parser.parse_args(argv)
    if not 0 < args.rate < math.inf or args.count < 5:  # nan too: its ticks never sleep
        parser.error("--rate must be a positive finite number and --count at least 5")
    if args.memory == "cuda" and cuda_device_count() == 0:
        parser.error("--memory cuda: no usable CUDA device here")
    print(f"{args.memory} memory, {args.count} tensors (1x3x1080x1920 float16) and images (1920x1080 rgba16) at "
          f"{args.rate:g} Hz each, cross-process; us", flush=True)
    print(f"{'':8} {'phase':12} {'p50':>8} {'p90':>8} {'p99':>8}")
    for kind, phases in measure(args.memory, args.rate, args.count).items():
        phases["total"] = [sum(parts) for parts in zip(*phases.values(), strict=True)]
        for phase, values in phases.items():
            cuts = statistics.quantiles(values, n=100, method="inclusive")
            print(f"{kind:8} {phase:12} " + " ".join(f"{cuts[q - 1]:8.1f}" for q in (50, 90, 99)), flush=True)


if __name__ == "__main__":
    raise SystemExit(run_tool(main))
