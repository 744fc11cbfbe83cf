"""``bag_record -o BAG TOPIC...``: record GPU topics (and any other) into an ordinary rosbag2 bag.

``GpuImage`` topics become ``sensor_msgs/Image`` (``CompressedImage`` with ``--compressed``), ``GpuPointCloud2``
topics ``sensor_msgs/PointCloud2``, every other topic is stored as it came; header stamps are kept and the
receive time is each message's bag time.  Ctrl-C or SIGTERM closes the bag (metadata written) and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ros2_cuda_ipc_core import (
    bounded_number,
    cuda_device_count,
    encode_jpeg,
    jpeg_backend,
    spin_until_stopped,
    teardown_bounded,
    tool_parser,
    warm_up_jpeg,
)

from .bag_errors import BagError
from .bag_source import one_line
from .cli import number_argument, run_bag_tool
from .recordings import JpegEncoder
from .split_writer import STORAGES, SplitBagWriter
from .topic_names import full_topic_name

__all__ = ["main", "parse_args"]

log = logging.getLogger("bag_record")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = tool_parser(__name__, __doc__.split("\n\n")[0], prog="bag_record")
    parser.add_argument("topics", nargs="+", metavar="TOPIC", help="topics to record (waited for until they appear)")
    parser.add_argument("-o", "--output", required=True, metavar="BAG", help="the bag directory to create")
    parser.add_argument("-s", "--storage", choices=sorted(STORAGES), default="mcap", help="storage (default mcap)")
    parser.add_argument("--compressed", action="store_true",
                        help="GpuImage topics as JPEG sensor_msgs/CompressedImage (the fallback twins' encoder)")
    parser.add_argument("--jpeg-quality", type=bounded_number(int, 1, 100), default=90, metavar="1..100",
                        help="JPEG quality of --compressed images, 1 (smallest) to 100 (best) (default 90)")
    parser.add_argument("-b", "--max-bag-size", type=number_argument(int), default=0, metavar="BYTES",
                        help="start a new file past this many bytes (0: never)")
    parser.add_argument("-d", "--max-duration", type=number_argument(float), default=0.0, metavar="SECONDS",
                        help="start a new file after this many seconds of bag time (0: never)")
    parser.add_argument("--ring", type=int, default=8, metavar="N",
                        help="host buffers per GPU topic: frames in flight before drops (default 8)")
    parser.add_argument("--device", type=int, default=0, help="CUDA device of the side stream (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no live status line")
    args = parser.parse_args(argv)
    if args.ring < 1:
        parser.error(f"--ring {args.ring}: at least 1")
    return args


def jpeg_encoder(device: int) -> tuple[JpegEncoder, bool]:
    """The JPEG encoder of the compressed CPU twins, warmed up, and whether it encodes CUDA frames on the GPU.

    The warm-up (the library's import; on the GPU, torch's CUDA start and nvJPEG) takes seconds: done here,
    before any topic is subscribed, it costs no frame.
    """
    if jpeg_backend("host") is None:
        raise BagError("--compressed needs a JPEG encoder: pip install Pillow (or torchvision)")
    on_gpu = jpeg_backend("cuda") == "torchvision" and cuda_device_count() > device
    warm_up_jpeg("host")
    if on_gpu:
        try:
            warm_up_jpeg("cuda", device)
        except Exception as exc:  # torch without CUDA, a driver it cannot use: the host encoder does it all
            log.warning("the GPU JPEG encoder did not start (%s: %s): CUDA frames are encoded on the host",
                        type(exc).__name__, exc)
            on_gpu = False
    return encode_jpeg, on_gpu


def _status_printer() -> Any:
    tty = sys.stderr.isatty()

    def show(line: str) -> None:
        sys.stderr.write(("\r\033[K" + line) if tty else line + "\n")
        sys.stderr.flush()
    return show


def record(args: argparse.Namespace) -> int:
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from .recorder import BagRecorder

    topics = [full_topic_name(topic) for topic in args.topics]  # a name no topic can have: before the folder is made
    sink = SplitBagWriter(args.output, args.storage, args.max_bag_size, args.max_duration)  # refuses a bad -o first
    try:
        encoder, on_gpu = jpeg_encoder(args.device) if args.compressed else (None, False)
    except BaseException:  # nothing recorded: the folder just made goes again
        shutil.rmtree(sink.path, ignore_errors=True)
        raise
    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)  # our handlers: the bag is closed before rclpy goes
    recorder: BagRecorder | None = None
    try:
        try:
            recorder = BagRecorder(sink, topics, ring_size=args.ring, device=args.device, compressed=encoder,
                                   jpeg_on_gpu=on_gpu, quality=args.jpeg_quality,
                                   print_status=None if args.quiet else _status_printer())
        except Exception:  # nothing recorded: the folder goes, so the corrected command is not refused
            shutil.rmtree(sink.path, ignore_errors=True)
            raise
        running = recorder
        spin_until_stopped(lambda: rclpy.spin_once(running, timeout_sec=0.2), lambda: running.error is None)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the bag's close short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if recorder is not None:
            recorder.close()  # the writer thread closes the bag
        elif sink.path.exists():  # stopped while starting: an empty bag, as ros2 bag record leaves one
            sink.close()
        with teardown_bounded():
            if recorder is not None:
                recorder.destroy_node()
            rclpy.try_shutdown()
    if recorder is None:
        return 0
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    status = recorder.status
    status.settle(sink.topic_counts())  # what the closed bag holds: a disk error costs what was not whole
    lost = sum(c.lost for c in status.topics.values())
    print(status.table())
    print(f"bag_record: {args.output}: {sum(c.written for c in status.topics.values())} messages in "
          f"{sink.files} file{'s' if sink.files != 1 else ''}, {sum(c.dropped for c in status.topics.values())} "
          f"dropped{f', {lost} lost' if lost else ''}", flush=True)
    if recorder.error is not None:
        print(f"bag_record: writing stopped: {one_line(recorder.error)}; the bag is closed with what reached the "
              f"disk whole ({lost} message{'s' if lost != 1 else ''} lost, the frames after it dropped)",
              file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run_bag_tool("bag_record", lambda: record(args))


if __name__ == "__main__":
    sys.exit(main())
