"""Payloads: rgba8 images given as WIDTHxHEIGHT, and the Ouster point cloud layout."""

from __future__ import annotations

import argparse
import importlib.util
import re
from dataclasses import dataclass

#: 128 beams x 1024 columns of 48-byte points: an Ouster OS1-128 scan as its driver publishes it.
OUSTER = "ouster"
DEFAULT_PAYLOADS = ("640x480", "1920x1080", "3840x2160")
_IMAGE = re.compile(r"^(\d+)x(\d+)$")


@dataclass(frozen=True)
class Payload:
    """One frame's geometry: ``height`` rows of ``width`` elements of ``element_bytes`` bytes."""

    name: str
    kind: str  # "image" (rgba8) or "cloud"
    width: int
    height: int
    element_bytes: int

    @property
    def byte_size(self) -> int:
        return self.width * self.height * self.element_bytes


def pointcloud_available() -> bool:
    return importlib.util.find_spec("ros2_cuda_ipc_pointcloud") is not None


def default_payloads() -> list[str]:
    """The three image sizes, and the Ouster cloud when ros2_cuda_ipc_pointcloud is installed."""
    return [*DEFAULT_PAYLOADS, *([OUSTER] if pointcloud_available() else [])]


def parse_payload(text: str) -> Payload:
    """argparse ``type=``: ``640x480`` (an rgba8 image) or ``ouster`` (a 128 x 1024 x 48 B point cloud)."""
    if text == OUSTER:
        if not pointcloud_available():
            raise argparse.ArgumentTypeError("the ouster point cloud needs the ros2_cuda_ipc_pointcloud package, "
                                             "which is not installed")
        return Payload(OUSTER, "cloud", 1024, 128, 48)
    match = _IMAGE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected WIDTHxHEIGHT (e.g. 1920x1080) or {OUSTER!r}")
    width, height = int(match[1]), int(match[2])
    if not (0 < width <= 16384 and 0 < height <= 16384):
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be between 1 and 16384")
    if width * height % 2:
        raise argparse.ArgumentTypeError(f"{text!r}: the frame must be whole 64-bit words (an even pixel count)")
    return Payload(text, "image", width, height, 4)
