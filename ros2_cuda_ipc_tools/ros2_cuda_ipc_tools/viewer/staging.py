"""How a leased frame's bytes reach a GL buffer: a GPU-to-GPU copy into a registered buffer, or through the host.

``GpuStaging`` registers the GL buffer with CUDA once (``cuda.core.GraphicsResource``, write-discard),
and per frame maps it, copies the frame into it on the GPU (one ``cuMemcpy2DAsync`` with the frame's
own strides: rows with padding, points of any ``point_step``), and unmaps it, which orders GL's next
use of the buffer after the copy.  ``HostStaging`` gives GL dense host bytes to upload: a host frame
as it lies (or packed once when it is strided), a CUDA frame downloaded (counted: the copy the
interop path exists to avoid).  Either way the frame's lease can go back when ``stage`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import copy_strided

__all__ = ["FrameBytes", "GpuStaging", "HostStaging", "InteropUnavailable", "UploadPath", "interop_problem"]


class InteropUnavailable(RuntimeError):
    """CUDA-OpenGL interop cannot run here (no cuda.core GraphicsResource, GL not on the CUDA device, ...)."""


@dataclass(frozen=True)
class FrameBytes:
    """A frame in a leased block as a strided grid of elements: what to copy, from where, packed how.

    ``address`` is element 0 (host address or CUDA device pointer); ``element_bytes`` is what is
    contiguous (a pixel's channels, a whole point); the packed result is ``shape`` elements back to back.
    """

    address: int
    memory: str  #: 'host' or 'cuda'
    device: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    element_bytes: int
    stream: Any = None  #: the cuda.core Stream the frame was read on (CUDA frames): copies are ordered on it

    @property
    def nbytes(self) -> int:
        """Bytes of the packed copy."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.element_bytes

    @property
    def packed_strides(self) -> tuple[int, ...]:
        strides, step = [], self.element_bytes
        for extent in reversed(self.shape):
            strides.append(step)
            step *= extent
        return tuple(reversed(strides))

    @property
    def is_packed(self) -> bool:
        return all(n == 1 or s == p for n, s, p in zip(self.shape, self.strides, self.packed_strides, strict=True))


def interop_problem() -> str | None:
    """Why CUDA-OpenGL interop cannot be tried in this process, or None when it can."""
    try:
        from cuda.core import GraphicsResource  # noqa: F401
    except ImportError as exc:
        return f"cuda.core has no GraphicsResource ({exc}; it arrived in cuda-core 0.7)"
    return None


class GpuStaging:
    """A GL buffer registered with CUDA (write-discard): CUDA frames are copied into it on the GPU."""

    def __init__(self, gl_buffer: Any, device: int) -> None:
        problem = interop_problem()
        if problem is not None:
            raise InteropUnavailable(problem)
        from cuda.core import Device, GraphicsResource

        self.buffer = gl_buffer
        self.device = device
        self._device = Device(device)
        self._device.set_current()
        try:
            self._resource = GraphicsResource.from_gl_buffer(int(gl_buffer.glo), flags="write_discard")
        except Exception as exc:  # cuda.core raises CUDAError: the GL context is not on a CUDA device, say
            raise InteropUnavailable(f"CUDA could not register the GL buffer: {exc}") from None
        self.copies = 0

    def stage(self, frame: FrameBytes) -> None:
        """Copy ``frame`` (CUDA memory, ``device``) into the buffer; complete on return, GL sees it next."""
        if frame.memory != "cuda" or frame.device != self.device:
            raise InteropUnavailable(f"a {frame.memory} frame on device {frame.device} cannot use interop "
                                     f"registered on CUDA device {self.device}")
        if frame.nbytes > self.buffer.size:
            raise ValueError(f"a frame of {frame.nbytes} bytes does not fit the {self.buffer.size}-byte GL buffer")
        self._device.set_current()  # this thread may not have the context yet (a multi-threaded executor)
        # GL's last use of the buffer (the texture upload from it) must be submitted before CUDA maps it: the
        # map orders the copy after that GL work, and a suite run on an H100 (session 16) hung 60 s in the copy's
        # synchronize behind it while the publisher kept publishing.  finish() submits it and waits (µs here).
        self.buffer.ctx.finish()
        with self._resource.map(stream=frame.stream) as mapped:  # unmapped on leaving: GL's next use is after
            copy_strided(int(mapped.handle), frame.packed_strides, frame.address, frame.strides, frame.shape,
                         frame.element_bytes, frame.device, frame.stream)
        self.copies += 1

    def close(self) -> None:
        self._resource.close()


class HostStaging:
    """Dense host bytes of a frame, for ``glTexSubImage2D`` / ``glBufferSubData``; counts CUDA downloads."""

    def __init__(self) -> None:
        self._packed = np.empty(0, dtype=np.uint8)
        self.device_to_host_copies = 0

    def stage(self, frame: FrameBytes) -> np.ndarray:
        """The frame's bytes packed, as a uint8 array valid while the frame's lease and until the next call."""
        if frame.memory == "host" and frame.is_packed:
            import ctypes

            raw = (ctypes.c_uint8 * frame.nbytes).from_address(frame.address)
            return np.ctypeslib.as_array(raw)  # the leased host block itself: no copy before GL's own
        if self._packed.size < frame.nbytes:
            self._packed = np.empty(frame.nbytes, dtype=np.uint8)
        out = self._packed[: frame.nbytes]
        cuda = frame.device if frame.memory == "cuda" else None
        copy_strided(int(out.ctypes.data), frame.packed_strides, frame.address, frame.strides, frame.shape,
                     frame.element_bytes, cuda, frame.stream)
        if cuda is not None:
            self.device_to_host_copies += 1
        return out


class UploadPath:
    """Which way one layer's frames reach GL, and why: interop is tried per new buffer, never again once refused."""

    def __init__(self, what: str) -> None:
        self.what = what  #: 'frames', 'points': what the reasons call them
        self.name: str | None = None  #: 'interop' or 'host' once a frame came
        self.reason = ""
        self._refused: str | None = None

    def choose(self, frame: FrameBytes, gl_buffer: Any) -> GpuStaging | None:
        """A ``GpuStaging`` on ``gl_buffer`` for a CUDA frame where interop works; None: upload from the host."""
        if frame.memory != "cuda":
            self.name, self.reason = "host", f"the {self.what} are in host memory"
            return None
        if self._refused is None:
            try:
                staging = GpuStaging(gl_buffer, frame.device)
            except InteropUnavailable as exc:
                self._refused = str(exc)
            else:
                self.name, self.reason = "interop", f"CUDA {self.what} copied on the GPU into a registered GL buffer"
                return staging
        self.name, self.reason = "host", f"CUDA {self.what} downloaded: no CUDA-OpenGL interop ({self._refused})"
        return None
