"""Where a publish's time goes at a camera's rate, up to the descriptor's DDS write: a developer's profile.

    python tools/profile_publish.py [--memory cuda|host] [--rate 30] [--count 300] [--size 3840x2160]

An ``ImagePublisher`` (rgba8) on a real rclpy node publishes one frame per tick and is idle in between, as the
benchmark's producer: the frame's fill is finished before the frame is stamped, so what is timed is what
``benchmark``'s ``send`` column counts, from the stamp to ``publish`` returning. Each step of the publish
(the message's fields, the block's readiness mark and its lease, the direct sender, rclpy's publish, the CPU
twins) and each CUDA driver call it makes is wrapped by a timer; prints the calls per frame and the p50 / p90 of
each step's time per frame (inclusive; a wrapper adds ~0.2-1 us). ``PHASE stamp to DDS write`` ends where rclpy's
publish begins: what a subscriber waits for on the publisher's side beyond the benchmark's floor.

It wraps private names by design (it is a profiler); nothing here is imported by the packages. Ctrl-C or SIGTERM
ends it with exit status 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from step_timer import WARMUP_FRAMES, at_rate, frame_ns, print_table, timed, wrap_attribute

_dds_write_started: list[int] = []
PUBLISH_DRIVER_CALLS = ("cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent",
                        "cuStreamQuery", "cuStreamWriteValue64", "cuEventRecord")


def instrument(memory: str) -> None:
    import rclpy.publisher

    from ros2_cuda_ipc_core.direct.sender import DirectSender
    from ros2_cuda_ipc_core.pool.block_manager import BlockManager
    from ros2_cuda_ipc_core.pool.publish_block import PublishBlock
    from ros2_cuda_ipc_core.typed.publisher import TypedPublisher
    from ros2_cuda_ipc_core.typed.twins import CpuTwins
    from ros2_cuda_ipc_image.layout import ImageLayout

    targets: list[tuple[Any, str, str]] = [
        (TypedPublisher, "publish_block", "TypedPublisher.publish_block"),
        (ImageLayout, "fill_message", "ImageLayout.fill_message"),
        (PublishBlock, "prepare_publish", "PublishBlock.prepare_publish"),
        (BlockManager, "_finish", "BlockManager._finish (lease, metadata)"),
        (DirectSender, "send", "DirectSender.send"),
        (CpuTwins, "offer", "CpuTwins.offer"),
    ]
    publish = rclpy.publisher.Publisher.publish

    def publish_noting_its_start(self: Any, msg: Any) -> None:
        _dds_write_started.append(time.perf_counter_ns())
        publish(self, msg)

    rclpy.publisher.Publisher.publish = timed("rclpy Publisher.publish", publish_noting_its_start)  # type: ignore[method-assign]
    if memory == "cuda":
        from cuda.bindings import driver

        from ros2_cuda_ipc_core.memory import cuda_context
        from ros2_cuda_ipc_core.memory.cuda_memory import CudaMemory
        from ros2_cuda_ipc_core.memory.cuda_timeline import Timeline

        targets += [(CudaMemory, "record_ready", "CudaMemory.record_ready"), (Timeline, "signal", "Timeline.signal"),
                    (Timeline, "mark", "Timeline.mark"),
                    (cuda_context.on_device, "__enter__", "on_device.__enter__"),
                    (cuda_context.on_device, "__exit__", "on_device.__exit__")]
        for name in PUBLISH_DRIVER_CALLS:
            if hasattr(driver, name):
                setattr(driver, name, timed(f"driver.{name}", getattr(driver, name)))
    else:
        from ros2_cuda_ipc_core.memory.host_memory import HostMemory

        targets += [(HostMemory, "record_ready", "HostMemory.record_ready")]
    for owner, name, label in targets:
        wrap_attribute(owner, name, label)


def profile(memory: str, rate: float, count: int, width: int, height: int) -> None:
    import rclpy
    from std_msgs.msg import Header

    from ros2_cuda_ipc_image import ImagePublisher

    stream: Any = None
    if memory == "cuda":
        from ros2_cuda_ipc_core.memory import cuda_context
        from ros2_cuda_ipc_core.memory.cuda_driver import driver_call

        with cuda_context.on_device(0):
            cu = cuda_context.driver()
            stream = int(driver_call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
    instrument(memory)
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # Ctrl-C a KeyboardInterrupt, not a shut-down context
    node = rclpy.create_node("profile_publish")
    publisher = ImagePublisher(node, "profile_publish/image", width=width, height=height, encoding="rgba8",
                               memory=memory, fallback=False)

    def frame(_: int) -> dict[str, float] | None:
        borrowed = publisher.borrow(timeout=1.0)
        if borrowed is None:
            return None
        with borrowed:
            header = Header()
            frame_ns.clear()
            _dds_write_started.clear()
            start = time.perf_counter_ns()
            borrowed.publish(stream, header)
            total = (time.perf_counter_ns() - start) / 1e3
        row = {label: ns / 1e3 for label, ns in frame_ns.items()}
        row["PHASE publish (stamp to return)"] = total
        if _dds_write_started:
            row["PHASE stamp to DDS write"] = (_dds_write_started[0] - start) / 1e3
        return row

    try:
        print(f"profile_publish: publishing {WARMUP_FRAMES} + {count} frames at {rate:g} Hz", file=sys.stderr, flush=True)
        rows = at_rate(rate, count, frame)
        print_table(rows, f"{memory} publish, {width}x{height} rgba8, {rate:g} Hz, {count} frames "
                           f"(+{WARMUP_FRAMES} warm-up), no subscriber, wrappers on")
    finally:
        publisher.close()
        node.destroy_node()
        rclpy.try_shutdown()


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    for number in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored (a script's `cmd &`)
        signal.signal(number, _stop)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", choices=("cuda", "host"), default="cuda")
    parser.add_argument("--rate", type=float, default=30.0)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--size", default="3840x2160", help="WIDTHxHEIGHT")
    args = parser.parse_args()
    try:
        width, height = (int(part) for part in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size {args.size!r}: expected WIDTHxHEIGHT, e.g. 1920x1080")
    try:
        profile(args.memory, args.rate, args.count, width, height)
    except KeyboardInterrupt:
        print("profile_publish: interrupted; no table (it is printed once every frame was timed)")


if __name__ == "__main__":
    main()
