"""``python -m ros2_cuda_ipc_tools.bag.benchmark``: how fast bag_record writes a raw camera, next to the disk.

In one run, on the disk the bag goes to: the disk's own rate (``os.write`` of frame-sized buffers, then
``fsync``); then, per storage, a camera process publishing ``--width`` x ``--height`` rgba8 frames from a
``--memory`` pool at ``--fps`` for ``--seconds`` into ``bag_record``, with what it wrote, dropped and
failed, its MB/s (bag bytes over the time from the first frame to the bag closed and synced) and its CPU
per frame (user + system, start-up excluded); then ``bag_play`` of that bag into ``--memory`` pools as
fast as it can (``--rate 1000``): its frames per second.  Figures, not a test: nothing is asserted.

The camera writes a frame's index into its block's first bytes and leaves the rest as filled at start,
so the camera costs little and the recorder's cost is what is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ros2_cuda_ipc_core import tool_parser

from .cli import number_argument

__all__ = ["main"]

TOPIC = "/bag_benchmark/image"


def _disk_rate(folder: Path, frame_bytes: int, frames: int) -> float:
    """MB/s of ``frames`` writes of ``frame_bytes`` into a new file in ``folder``, then ``fsync``."""
    buffer = memoryview(bytearray(os.urandom(1 << 20)) * (frame_bytes >> 20 or 1))
    path = folder / "disk-rate.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.monotonic()
        for _ in range(frames):
            view = buffer
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
        seconds = time.monotonic() - start
    finally:
        os.close(fd)
        path.unlink()
    return frames * len(buffer) / seconds / 1e6


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tool(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", f"ros2_cuda_ipc_tools.bag.{name}", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _record(args: argparse.Namespace, storage: str, bag: Path) -> dict:
    recorder = _tool("record", "-o", str(bag), TOPIC, "--storage", storage, "--ring", str(args.ring), "--quiet")
    camera = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_tools.bag.benchmark", "camera", args.memory, str(args.width),
                               str(args.height), str(args.fps), str(args.seconds)], stdout=subprocess.PIPE, text=True)
    try:
        assert camera.stdout is not None
        json.loads(camera.stdout.readline())  # {"ready": true}: the recorder has subscribed
        start_up_cpu, started = _cpu_seconds(recorder.pid), time.monotonic()
        published = json.loads(camera.communicate(timeout=args.seconds * 4 + 120)[0].strip().splitlines()[-1])
        reaped = _children_cpu()  # the camera's, and what was reaped before it
        recorder.send_signal(signal.SIGINT)
        out, err = recorder.communicate(timeout=600)  # the close writes the summary and syncs the file
        seconds = time.monotonic() - started
        cpu = _children_cpu() - reaped - start_up_cpu
    finally:
        camera.kill()
        recorder.kill()
    row = next((line.split() for line in out.splitlines() if line.startswith(TOPIC)), None)
    if recorder.returncode != 0 or row is None:
        raise SystemExit(f"bag_record ended with {recorder.returncode}: {err.strip()[-2000:]}")
    size = sum(p.stat().st_size for p in bag.iterdir())
    written = int(row[2])
    return {"published": published["frames"], "written": written, "dropped": int(row[3]), "failed": int(row[4]),
            "MB": size / 1e6, "MB/s": size / 1e6 / seconds, "cpu ms/frame": 1000 * cpu / max(written, 1),
            "late": published["late"]}


def _children_cpu() -> float:
    """User + system CPU of every child reaped so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _replay(args: argparse.Namespace, bag: Path) -> float:
    """Frames per second bag_play puts ``bag`` into ``--memory`` pools (its own count and time)."""
    player = _tool("play", str(bag), "--memory", args.memory, "--rate", "1000", "--linger", "0",
                   "--wait-for-subscribers", "0")
    out, err = player.communicate(timeout=600)
    found = re.search(r"played (\d+) messages, .* in ([0-9.]+) s", out)
    if player.returncode != 0 or found is None:
        raise SystemExit(f"bag_play ended with {player.returncode}: {err.strip()[-2000:]}")
    return int(found.group(1)) / max(float(found.group(2)), 1e-9)


def camera(memory: str, width: str, height: str, fps: str, seconds: str) -> None:
    """The camera process: rgba8 frames at ``fps`` for ``seconds``, the index in each block's first bytes."""
    import rclpy

    from ros2_cuda_ipc_image import ImagePublisher
    from ros2_cuda_ipc_msgs.msg import GpuImage

    w, h, rate, count = int(width), int(height), float(fps), int(float(fps) * float(seconds))
    rclpy.init(args=[])
    node = rclpy.create_node("bag_benchmark_camera")
    images = ImagePublisher(node, TOPIC, width=w, height=h, encoding="rgba8", memory=memory,  # type: ignore[arg-type]
                            block_count=16, qos=100, fallback=False)
    stream = None
    if images.pool.memory == "cuda":
        from cuda.core import Device

        device = Device(images.pool.device)
        device.set_current()
        stream = device.create_stream()
    frame_bytes = images.layout.byte_extent
    try:
        deadline = time.monotonic() + 60
        while images.subscription_count == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        print(json.dumps({"ready": True}), flush=True)
        published = late = 0
        start = time.monotonic()
        for i in range(count):
            frame = images.borrow()
            if frame is not None:
                with frame:
                    _fill(frame.device_ptr, frame_bytes, i, stream)
                    header = GpuImage().header
                    header.stamp.sec, header.stamp.nanosec = 1000 + i, i
                    frame.publish(stream, header=header)
                    published += 1
            wait = start + (i + 1) / rate - time.monotonic()
            late += wait < 0
            time.sleep(max(0.0, wait))
        time.sleep(2.0)  # the pool outlives the recorder's last copies
    finally:
        images.close()
        node.destroy_node()
        rclpy.try_shutdown()
    print(json.dumps({"frames": published, "late": late}), flush=True)


def _fill(address: int, size: int, index: int, stream: object) -> None:
    """Host: the frame's index into its first 8 bytes.  CUDA: every byte of the block set to the index's low byte
    (one memset on the GPU, enqueued on the stream the frame is published on)."""
    import ctypes

    if stream is None:
        ctypes.c_uint64.from_address(address).value = index
        return
    from cuda.bindings import driver as cu

    cu.cuMemsetD8Async(address, index % 256, size, int(stream.handle))  # type: ignore[attr-defined]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = tool_parser(__name__, __doc__, prog="python -m ros2_cuda_ipc_tools.bag.benchmark")
    parser.add_argument("--memory", choices=("host", "cuda"), default="host",
                        help="where the camera's frames and bag_play's pools live (default host)")
    parser.add_argument("--width", type=number_argument(int, 1), default=3840, help="frame width in pixels (default 3840)")
    parser.add_argument("--height", type=number_argument(int, 1), default=2160,
                        help="frame height in pixels (default 2160)")
    parser.add_argument("--fps", type=number_argument(above=True), default=20.0,
                        help="frames a second the camera publishes (default 20)")
    parser.add_argument("--seconds", type=number_argument(above=True), default=6.0,
                        help="how long the camera publishes (default 6)")
    parser.add_argument("--storage", nargs="+", choices=("mcap", "sqlite3"), default=["mcap"],
                        help="the storages measured, one recording each (default mcap)")
    parser.add_argument("--ring", type=number_argument(int, 1), default=16,
                        help="bag_record --ring: host buffers per topic (default 16)")
    parser.add_argument("--disk-frames", type=number_argument(int, 1), default=60,
                        help="frames written (os.write + fsync) to measure the disk's own rate (default 60)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="the folder the bags go to, on the disk to measure (default: a temporary folder)")
    parser.add_argument("--no-replay", action="store_true", help="skip the bag_play measurement")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["camera"]:
        camera(*sys.argv[2:7])
        return 0
    args = parse_args(argv)
    frame_bytes = args.width * args.height * 4
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bag-benchmark-") as tmp:
        folder = Path(tmp)
        disk = _disk_rate(folder, frame_bytes, args.disk_frames)
        print(f"disk ({folder}): os.write + fsync of {args.disk_frames} frames of {frame_bytes / 1e6:.1f} MB: "
              f"{disk:.0f} MB/s = {disk * 1e6 / frame_bytes:.1f} frames/s", flush=True)
        print(f"camera: {args.width}x{args.height} rgba8, {args.memory} memory, {args.fps:g} Hz for {args.seconds:g} s "
              f"= {frame_bytes * args.fps / 1e6:.0f} MB/s", flush=True)
        for storage in args.storage:
            bag = folder / storage
            result = _record(args, storage, bag)
            print(f"bag_record {storage}: published {result['published']} ({result['late']} late), written "
                  f"{result['written']}, dropped {result['dropped']}, failed {result['failed']}; "
                  f"{result['MB']:.0f} MB at {result['MB/s']:.0f} MB/s = {100 * result['MB/s'] / disk:.0f} % of the "
                  f"disk's {disk:.0f} MB/s; recorder CPU {result['cpu ms/frame']:.1f} ms a frame", flush=True)
            if not args.no_replay:
                print(f"bag_play {storage} into {args.memory} pools: {_replay(args, bag):.1f} frames/s", flush=True)
            for path in sorted(bag.iterdir()):
                path.unlink()
            bag.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
