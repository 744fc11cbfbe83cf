"""``viewer``: look at GpuImage / GpuPointCloud2 topics; a window, or ``--headless`` offscreen through EGL.

    viewer camera/image                                  # a window; Ctrl-C or closing it ends it
    viewer camera/image --cloud lidar/points --range auto
    viewer camera/image --headless --snapshot out.png --frames 30

Options become the ``Viewer`` node's parameters; ``--ros-args ...`` after them is passed to rclpy.
Ctrl-C or SIGTERM ends it with exit code 0, unless ``--snapshot`` was asked for and no frame came (exit
code 1, saying so); a topic with no publisher, or of another type, is named in a warning a few seconds on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ros2_cuda_ipc_core import tool_parser, topic_name

__all__ = ["build_parser", "main"]


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT (1280x720, say)") from None
    return width, height


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(__name__, __doc__, prog="viewer")  # plain-text help and --version, as every tool
    parser.add_argument("images", nargs="*", metavar="IMAGE_TOPIC", help="GpuImage topics (default: image, "
                        "unless --cloud is given)")
    parser.add_argument("--cloud", action="append", default=[], metavar="TOPIC", help="a GpuPointCloud2 topic")
    parser.add_argument("--headless", action="store_true", help="render offscreen through EGL (no display needed)")
    parser.add_argument("--snapshot", default="", metavar="PATH", help="write what was drawn to this PNG")
    parser.add_argument("--frames", type=int, default=0, metavar="N",
                        help="stop (writing the snapshot) once every topic had N frames on screen")
    parser.add_argument("--size", type=_size, default=(1280, 720), metavar="WxH", help="window size (1280x720)")
    parser.add_argument("--range", default="", metavar="auto|LO:HI",
                        help="mono images: values shown black..white (default: the type's whole range)")
    parser.add_argument("--color-field", default="intensity", metavar="NAME", help="clouds: the field that colours")
    parser.add_argument("--color-range", default="auto", metavar="auto|LO:HI", help="clouds: the colour field's range")
    parser.add_argument("--point-size", type=float, default=2.0, help="clouds: point size in pixels")
    parser.add_argument("--distance", type=float, default=30.0, help="clouds: the camera's distance, metres")
    parser.add_argument("--rate", type=float, default=60.0, help="most draws a second (60)")
    parser.add_argument("--no-overlay", action="store_true", help="draw the frames only, no text")
    return parser


def parameters(args: argparse.Namespace) -> dict[str, object]:
    """The node parameters the command line asks for."""
    images = args.images or ([] if args.cloud else ["image"])
    return {"images": ",".join(images), "clouds": ",".join(args.cloud), "headless": args.headless,
            "snapshot_path": args.snapshot, "frames": args.frames, "width": args.size[0], "height": args.size[1],
            "value_range": args.range, "color_field": args.color_field, "color_range": args.color_range,
            "point_size": args.point_size, "camera_distance": args.distance, "rate": args.rate,
            "overlay": not args.no_overlay}


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    split = args_in.index("--ros-args") if "--ros-args" in args_in else len(args_in)
    args = build_parser().parse_args(args_in[:split])  # unknown options: usage and exit code 2
    for option, topics in (("IMAGE_TOPIC", args.images), ("--cloud", args.cloud)):
        try:  # one line, not the usage: the mistake is in the name, not in how the command is used
            for topic in topics:
                topic_name(topic)
        except argparse.ArgumentTypeError as exc:
            print(f"viewer: argument {option}: {exc}", file=sys.stderr)
            return 2
    from rclpy.parameter import Parameter

    from ros2_cuda_ipc_core import run_nodes, warn_unknown_parameters

    from .node import Viewer
    from .surface import SurfaceError

    overrides = [Parameter(name, value=value) for name, value in parameters(args).items()]
    viewers: list[Viewer] = []

    def make() -> list[Viewer]:
        viewers.append(Viewer(parameter_overrides=overrides))
        warn_unknown_parameters(viewers[0])  # a misspelled --ros-args -p: said, with the closest name
        return viewers

    try:
        code = run_nodes(make, args=["viewer", *args_in[split:]])
    except ValueError as exc:
        print(f"viewer: {exc}", file=sys.stderr)
        return 2
    except SurfaceError as exc:
        print(f"viewer: {exc}", file=sys.stderr)
        return 1
    if viewers and viewers[0].snapshot_missing:  # asked for, and nothing to show: a stop is no success then
        topics = ", ".join(viewers[0].resolved_topics())
        print(f"viewer: no frame came on {topics}: no snapshot written to {args.snapshot}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
