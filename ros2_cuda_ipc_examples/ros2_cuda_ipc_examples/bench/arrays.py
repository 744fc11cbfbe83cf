"""Where a frame's bytes are touched: numpy for host memory, torch or cupy (on their own stream) on a GPU.

Both processes do the same work with the same library whatever the transport: the producer fills a
frame with one byte value, the consumer sums the frame's 64-bit words.  Only the path the bytes
take between them differs.  torch and cupy are imported only when a GPU run asks for them.
"""

from __future__ import annotations

import array
import importlib.util
from typing import Any

from .protocol import WORD_MASK

GPU_LIBRARIES = ("torch", "cupy")


def installed_gpu_libraries() -> list[str]:
    return [name for name in GPU_LIBRARIES if importlib.util.find_spec(name) is not None]


def to_message_data(host: Any) -> array.array:
    """One copy of a host buffer into what a ``uint8[]`` message field takes fastest on every distro."""
    data = array.array("B")
    data.frombytes(memoryview(host).cast("B"))
    return data


#: A frame-like buffer small enough to cost nothing, large enough for the kernels a frame uses.
WARM_UP_BYTES = 64 * 1024


class HostArrays:
    """numpy: frames in host memory."""

    name = "numpy"
    stream: Any = None

    def __init__(self) -> None:
        import numpy

        self.np = numpy

    def empty(self, byte_size: int) -> Any:
        return self.np.empty(byte_size, dtype=self.np.uint8)

    def fill(self, target: Any, value: int) -> None:
        """Fill a numpy array, or a writable frame whose ``array`` is one."""
        getattr(target, "array", target).fill(value)

    def download(self, frame: Any) -> Any:
        return frame

    def from_view(self, view: Any) -> Any:
        return self.np.asarray(view)

    def upload(self, data: Any) -> Any:
        return self.np.frombuffer(data, dtype=self.np.uint8)

    def synchronize(self) -> None:
        pass

    def checksum(self, frame: Any) -> int:
        return int(frame.reshape(-1).view(self.np.uint64).sum(dtype=self.np.uint64)) & WORD_MASK


class TorchArrays:
    """torch: frames on CUDA device ``device``, every kernel and copy on this object's own stream."""

    name = "torch"

    def __init__(self, device: int = 0) -> None:
        import torch

        self.torch = torch
        self.device = torch.device("cuda", device)
        self.stream = torch.cuda.Stream(device=self.device)

    def empty(self, byte_size: int) -> Any:
        return self.torch.empty(byte_size, dtype=self.torch.uint8, device=self.device)

    def fill(self, target: Any, value: int) -> None:
        with self.torch.cuda.stream(self.stream):
            self.torch.from_dlpack(target).fill_(value)
        self.stream.synchronize()

    def download(self, frame: Any) -> Any:
        with self.torch.cuda.stream(self.stream):
            return frame.cpu().numpy()

    def from_view(self, view: Any) -> Any:
        """The frame as a tensor, kept per block: used only inside the view's ``with``, on the read's stream (the
        import, once a block, happens on that stream; a kept tensor needs no stream context a frame)."""
        return view.kept(self._import)

    def _import(self, view: Any) -> Any:
        with self.torch.cuda.stream(self.stream):
            return self.torch.from_dlpack(view)

    def upload(self, data: Any) -> Any:
        host = self.torch.frombuffer(data, dtype=self.torch.uint8)
        with self.torch.cuda.stream(self.stream):
            return host.to(self.device)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def checksum(self, frame: Any) -> int:
        with self.torch.cuda.stream(self.stream):
            return int(frame.reshape(-1).view(self.torch.int64).sum()) & WORD_MASK


class CupyArrays:
    """cupy: frames on CUDA device ``device``, every kernel and copy on this object's own stream."""

    name = "cupy"

    def __init__(self, device: int = 0) -> None:
        import cupy

        self.cupy = cupy
        cupy.cuda.Device(device).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def empty(self, byte_size: int) -> Any:
        return self.cupy.empty(byte_size, dtype=self.cupy.uint8)

    def fill(self, target: Any, value: int) -> None:
        with self.stream:
            self.cupy.from_dlpack(target).fill(value)
        self.stream.synchronize()

    def download(self, frame: Any) -> Any:
        return self.cupy.asnumpy(frame, stream=self.stream)

    def from_view(self, view: Any) -> Any:
        """The frame as an array, kept per block: used only inside the view's ``with``, on the read's stream."""
        return view.kept(self._import)

    def _import(self, view: Any) -> Any:
        with self.stream:
            return self.cupy.from_dlpack(view)

    def upload(self, data: Any) -> Any:
        import numpy

        with self.stream:
            return self.cupy.asarray(numpy.frombuffer(data, dtype=numpy.uint8))

    def synchronize(self) -> None:
        self.stream.synchronize()

    def checksum(self, frame: Any) -> int:
        with self.stream:
            return int(frame.reshape(-1).view(self.cupy.uint64).sum(dtype=self.cupy.uint64)) & WORD_MASK


def gpu_arrays(library: str, device: int = 0) -> TorchArrays | CupyArrays:
    """The library's arrays on ``device``, warmed up: the upload's and checksum's kernels are loaded now (CUDA
    loads modules lazily, hundreds of milliseconds the first time), not while the first measured frame waits."""
    arrays = TorchArrays(device) if library == "torch" else CupyArrays(device)
    arrays.checksum(arrays.upload(bytearray(WARM_UP_BYTES)))
    arrays.synchronize()
    return arrays
