"""The command-line options of the commands that run example pipelines, and the checked options made of them.

``pipeline``, ``demo`` and ``benchmark_multicam`` share one set (:func:`add_pipeline_arguments`, read back by
:func:`pipeline_options`): frame size and rate, memory, one container or a process a node and the nodes'
executor and CUDA wait, the output directory, the namespace, and the pools' blocks and reuse delay.  The runner and the demo
add how long the source runs and the fanout's tensor type (:func:`add_run_arguments`, read back by
:func:`options_from`).  Whatever cannot work is a usage error (exit code 2) before anything starts.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ros2_cuda_ipc_core import CUDA_WAITS, DEFAULT_REUSE_DELAY, EXECUTORS, check_reuse_delay, executor_factory

from ..nodes.arrays import MemoryChoiceError, choose_memory
from .definitions import DEFAULT_SIZES, ELEMENT_BYTES, MAX_FRAME_BYTES, MIN_SIZES, PipelineOptions
from .namespace_claim import InvalidDomainId, domain_id

__all__ = ["SIZES", "add_pipeline_arguments", "add_run_arguments", "check_size", "options_from", "parse_size", "pipeline_options",
           "positive_number", "reuse_delay_seconds"]

_DIMENSION = re.compile(r"[0-9]{1,9}")  # ASCII digits: str.isdigit() takes other scripts' digits too
SIZES = {"480p": (640, 480), "720p": (1280, 720), "1080p": (1920, 1080), "4k": (3840, 2160)}


def positive_number(kind: type) -> Any:
    """An argparse ``type``: a ``kind`` (int or float) number above 0."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def reuse_delay_seconds(text: str) -> float:
    """A pool's ``reuse_delay``: a finite number of seconds, not negative."""
    try:
        return check_reuse_delay(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {text}") from None


def parse_size(text: str) -> tuple[int, int]:
    """'1080p', '4k', '720p', '480p' or WIDTHxHEIGHT."""
    if text.lower() in SIZES:
        return SIZES[text.lower()]
    width, sep, height = text.lower().partition("x")
    if not sep or not _DIMENSION.fullmatch(width) or not _DIMENSION.fullmatch(height):
        shown = repr(text[:40]) + ("..." if len(text) > 40 else "")
        raise argparse.ArgumentTypeError(f"{shown} is not one of {', '.join(SIZES)} or WIDTHxHEIGHT")
    return int(width), int(height)


def check_size(parser: argparse.ArgumentParser, size: tuple[int, int], pipeline: str) -> None:
    """A usage error unless ``size`` is between ``pipeline``'s smallest frame and its largest (in bytes)."""
    smallest, frame_bytes = MIN_SIZES[pipeline], size[0] * size[1] * ELEMENT_BYTES[pipeline]
    if size[0] < smallest[0] or size[1] < smallest[1]:
        parser.error(f"argument --size: {size[0]}x{size[1]} is below the smallest {pipeline} frame, "
                     f"{smallest[0]}x{smallest[1]}")
    if frame_bytes > MAX_FRAME_BYTES:
        parser.error(f"argument --size: {size[0]}x{size[1]} makes {frame_bytes:,}-byte frames, above the largest "
                     f"{pipeline} frame, {MAX_FRAME_BYTES >> 20} MiB")


def _defaults(pipelines: Sequence[str], index: int, unit: str) -> str:
    """The default size (``index`` 0) or rate (1) of each pipeline, as help says it."""
    def value(name: str) -> str:
        default = DEFAULT_SIZES[name][index]
        return f"{default[0]}x{default[1]}" if isinstance(default, tuple) else f"{default:g}{unit}"

    if len(pipelines) == 1:
        return value(pipelines[0])
    return "; ".join(f"{name} {value(name)}" for name in pipelines)


def add_pipeline_arguments(parser: argparse.ArgumentParser, pipelines: Sequence[str], out: Path, out_help: str) -> None:
    """The options every command that runs one of ``pipelines`` takes; :func:`pipeline_options` reads them back.

    ``out`` is ``--out``'s default, ``out_help`` what goes there."""
    lidar = " (a lidar: columns x rings)" if "lidar" in pipelines else ""
    parser.add_argument("--size", type=parse_size, default=None, metavar="SIZE",
                        help=f"{', '.join(SIZES)} or WIDTHxHEIGHT{lidar} (default: {_defaults(pipelines, 0, '')})")
    parser.add_argument("--fps", "--rate", dest="fps", type=positive_number(float), default=None,
                        help=f"frames per second (default: {_defaults(pipelines, 1, '')})")
    parser.add_argument("--memory", choices=["auto", "cuda", "host"], default="auto",
                        help="where frames live; auto: CUDA when a GPU and torch or cupy are here (default: auto)")
    parser.add_argument("--compose", action="store_true", help="every node in one container process")
    parser.add_argument("--executor", choices=EXECUTORS, default="single",
                        help="every node's executor (the container's with --compose): rclpy's single- or "
                             "multi-threaded one, or its C++ events executor, which costs a reader less CPU "
                             "(default: single)")
    parser.add_argument("--cuda-wait", choices=list(CUDA_WAITS), default="auto",
                        help="how every node's threads wait for the GPU: auto (the driver's: spin while a process has "
                             "fewer CUDA contexts than the machine has cores), spin, yield, or blocking (sleep until "
                             "the GPU is done: no CPU spent waiting) (default: auto)")
    parser.add_argument("--out", type=Path, default=out, help=f"{out_help} (default: %(default)s)")
    parser.add_argument("--namespace", default=None,
                        help=f"ROS namespace of the nodes (default: /{pipelines[0]}"
                             f"{''.join(f', /{name}' for name in pipelines[1:])})")
    parser.add_argument("--blocks", type=positive_number(int), default=4,
                        help="blocks in each publisher's pool; more absorb slower consumers (default: %(default)s)")
    parser.add_argument("--reuse-delay", type=reuse_delay_seconds, default=DEFAULT_REUSE_DELAY, metavar="SECONDS",
                        help="a published block is reused only this long after: a pool of N blocks publishes at "
                             "most N / SECONDS frames a second (default: %(default)s)")


def add_run_arguments(parser: argparse.ArgumentParser,
                      seconds_help: str = "camera runs this long (default: until --frames or Ctrl-C)") -> None:
    """The runner's and the demo's options: :func:`add_pipeline_arguments`' for fanout and lidar, how long the source
    runs and the fanout's tensor type; :func:`options_from` reads them back."""
    parser.add_argument("--seconds", type=positive_number(float), default=None, help=seconds_help)
    parser.add_argument("--frames", type=positive_number(int), default=None, help="camera sends this many frames")
    add_pipeline_arguments(parser, ("fanout", "lidar"), Path("pipeline-output"),
                           "where pipeline-summary.json, preview.png and the node logs go")
    parser.add_argument("--tensor-dtype", choices=["float16", "bfloat16", "float32"], default="float16",
                        help="fanout: the type of the NCHW tensor preprocessing sends inference (default: %(default)s)")


def pipeline_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     pipeline: str) -> tuple[PipelineOptions, str]:
    """The options of :func:`add_pipeline_arguments` as ``pipeline``'s, with the memory resolved (and why); the
    source's length and the tensor type are left at their defaults.  What cannot work is a usage error, now."""
    default_size, default_fps = DEFAULT_SIZES[pipeline]
    size, fps = args.size or default_size, args.fps or default_fps
    check_size(parser, size, pipeline)
    try:
        memory, why = choose_memory(args.memory)
    except MemoryChoiceError as exc:
        parser.error(str(exc))
    namespace = _checked_namespace(parser, args.namespace or pipeline)
    try:
        domain_id()
    except InvalidDomainId as exc:
        parser.error(str(exc))
    _check_out_dir(parser, args.out)
    if args.blocks < 2:
        parser.error(f"argument --blocks: a pool needs at least 2 blocks, not {args.blocks}")
    try:  # here, not in every node process after it started: Humble's rclpy has no events executor
        executor_factory(args.executor)
    except ValueError as exc:
        parser.error(f"argument --executor: {exc}")
    return PipelineOptions(size[0], size[1], fps, memory, namespace=namespace, out_dir=args.out,
                           block_count=args.blocks, reuse_delay=args.reuse_delay, cuda_wait=args.cuda_wait), why


def options_from(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 pipeline: str = "fanout") -> tuple[PipelineOptions, str]:
    """The options of :func:`add_run_arguments`, checked as :func:`pipeline_options` checks them."""
    options, why = pipeline_options(parser, args, pipeline)
    return replace(options, frames=args.frames or 0, seconds=args.seconds or 0.0, tensor_dtype=args.tensor_dtype), why


def _checked_namespace(parser: argparse.ArgumentParser, namespace: str) -> str:
    """``namespace`` made absolute, or a usage error naming what ROS refuses in it (before anything starts)."""
    from rclpy.exceptions import InvalidNamespaceException
    from rclpy.validate_namespace import validate_namespace

    namespace = namespace if namespace.startswith("/") else "/" + namespace
    try:
        validate_namespace(namespace)
    except InvalidNamespaceException as exc:
        parser.error(f"argument --namespace: {namespace!r} is not a ROS namespace: "
                     f"{str(exc).splitlines()[0].split(': ', 1)[-1].rstrip(':')}")
    return namespace


def _check_out_dir(parser: argparse.ArgumentParser, out: Path) -> None:
    """``--out`` (and its ``logs/``) must be a directory this process can write, now rather than after the start."""
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
        probe = out / ".pipeline-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        parser.error(f"argument --out: cannot write {out}: {exc.strerror or exc}")
