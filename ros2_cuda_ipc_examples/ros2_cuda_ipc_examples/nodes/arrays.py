"""One array API for the example nodes: numpy on host memory, torch (else cupy) on CUDA memory.

The nodes do the same arithmetic whatever the memory is; this module picks the library that can
do it there, and says in one line what is missing when none can.  A GPU backend also sets how the process's
threads wait for the GPU where ``ROS2_CUDA_IPC_CUDA_WAIT`` names it (the pipeline runner's ``--cuda-wait``).
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy as np

from ros2_cuda_ipc_core import BlockManager, CudaUnavailableError, cuda_wait_from_environment, set_cuda_wait

__all__ = ["ArrayBackend", "MemoryChoiceError", "backend_for", "choose_memory", "cuda_unavailable_reason",
           "gpu_array_library"]


class MemoryChoiceError(ValueError):
    """The requested memory cannot be used in this process; the message says why and what to install."""


def gpu_array_library() -> str | None:
    """'torch' or 'cupy' (the first one installed), or None: what draws and computes on CUDA memory."""
    for name in ("torch", "cupy"):
        if importlib.util.find_spec(name) is not None:
            return name
    return None


@functools.cache
def cuda_unavailable_reason(device: int = 0) -> str | None:
    """None when a CUDA pool can be made on ``device`` here, else why not (one line); asked once per process."""
    try:
        with BlockManager(1, block_count=1, memory="cuda", device=device):
            return None
    except CudaUnavailableError as exc:
        return str(exc)


def choose_memory(requested: str, device: int = 0) -> tuple[str, str]:
    """Resolve 'auto' / 'cuda' / 'host' to ('cuda' | 'host', why); raise MemoryChoiceError if 'cuda' cannot work."""
    if requested not in ("auto", "cuda", "host"):
        raise MemoryChoiceError(f"memory={requested!r}: expected 'auto', 'cuda' or 'host'")
    if requested == "host":
        return "host", "asked for host memory"
    reason = cuda_unavailable_reason(device)
    library = gpu_array_library()
    if reason is None and library is None:
        reason = "CUDA works here, but neither torch nor cupy is installed to compute on it (pip install torch)"
    if reason is not None:
        if requested == "cuda":
            raise MemoryChoiceError(f"memory='cuda' cannot be used: {reason}")
        return "host", reason
    return "cuda", f"CUDA device {device} is usable and {library} computes on it"


class ArrayBackend:
    """numpy, torch or cupy behind the few operations the example nodes use."""

    def __init__(self, name: str, device: int = 0) -> None:
        self.name = name
        self.device = device
        if name == "numpy":
            self.xp: Any = np
        elif name == "torch":
            import torch

            self.xp = torch
            self._torch_device = torch.device("cuda", device)
            self.stream: Any = torch.cuda.Stream(device=self._torch_device)
        elif name == "cupy":
            import cupy

            self.xp = cupy
            with cupy.cuda.Device(device):
                self.stream = cupy.cuda.Stream(non_blocking=True)
        else:
            raise ValueError(f"no array backend {name!r}")
        if name == "numpy":
            self.stream = None

    @property
    def on_gpu(self) -> bool:
        return self.name != "numpy"

    def activate(self) -> Any:
        """A context manager making this backend's device and stream current (a no-op for numpy)."""
        if self.name == "torch":
            return self.xp.cuda.stream(self.stream)
        if self.name == "cupy":
            return self.stream
        return _NoContext()

    def wrap(self, image: Any) -> Any:
        """The zero-copy array of an image frame or view (writable for frames, read-only for views)."""
        if self.name == "numpy":
            return image.array
        return self.xp.from_dlpack(image)

    def read(self, view: Any) -> Any:
        """The zero-copy, read-only array of an image view for use **inside the read's callback only**, on this
        backend's stream (the subscription's): imported once per block and kept (``view.kept``), where
        :meth:`wrap` imports it every frame (about 100-200 us of DLPack on the H200)."""
        if self.name == "numpy":
            return view.array
        return view.kept(self.xp.from_dlpack)

    def tensor(self, tensor: Any) -> Any:
        """The zero-copy array of a tensor frame or view; for a type this library lacks (numpy's and cupy's
        bfloat16), the unsigned integers holding its bits (see :meth:`from_element` and :meth:`to_element`)."""
        if self.name == "torch" or tensor.layout.element is None:
            return self.wrap(tensor)
        return tensor.array if self.name == "numpy" else self.xp.from_dlpack(tensor.array)

    def to_element(self, array: Any, dtype_name: str) -> Any:
        """``array`` (float32) as ``dtype_name`` elements, or, for bfloat16 outside torch, as their bits."""
        if self.name == "torch":
            return array.to(getattr(self.xp, dtype_name))
        if dtype_name == "bfloat16":  # round to nearest even, then the upper half of the float32's bits
            bits = self.xp.ascontiguousarray(array, dtype=self.xp.float32).view(self.xp.uint32)
            return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(self.xp.uint16)
        return array.astype(dtype_name)

    def from_element(self, array: Any, dtype_name: str) -> Any:
        """float32 values of what :meth:`tensor` gave (bfloat16 bits outside torch made float32 again)."""
        if self.name == "torch":
            return array.float()
        if dtype_name == "bfloat16":
            return (array.astype(self.xp.uint32) << 16).view(self.xp.float32)
        return array.astype(self.xp.float32)

    def channels_first(self, hwc: Any) -> Any:
        """A (1, C, H, W) view of an (H, W, C) array, no copy."""
        return (hwc.permute(2, 0, 1) if self.name == "torch" else hwc.transpose(2, 0, 1))[None]

    def channels_last(self, chw: Any) -> Any:
        """An (H, W, C) view of a (C, H, W) array, no copy."""
        return chw.permute(1, 2, 0) if self.name == "torch" else chw.transpose(1, 2, 0)

    def upload(self, host: np.ndarray) -> Any:
        if self.name == "numpy":
            return host
        if self.name == "torch":
            return self.xp.from_numpy(np.ascontiguousarray(host)).to(self._torch_device)
        with self.xp.cuda.Device(self.device):
            return self.xp.asarray(host)

    def download(self, array: Any) -> np.ndarray:
        """A host copy; on the GPU this waits for the backend's stream, so it also ends the frame's work."""
        if self.name == "numpy":
            return np.asarray(array)
        if self.name == "torch":
            return array.cpu().numpy()
        return self.xp.asnumpy(array, stream=self.stream)

    def reinterpret(self, array: Any, dtype: Any, shape: tuple[int, ...]) -> Any:
        """The same contiguous bytes seen as ``dtype`` elements of ``shape`` (no copy)."""
        if self.name == "torch":
            return array.view(_torch_dtype(self.xp, np.dtype(dtype))).reshape(shape)
        return array.view(dtype).reshape(shape)

    def astype(self, array: Any, dtype: Any) -> Any:
        if self.name == "torch":
            return array.to(_torch_dtype(self.xp, np.dtype(dtype)))
        return array.astype(dtype)

    def arange(self, n: int) -> Any:
        return self.upload(np.arange(n, dtype=np.int64))

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()


class _NoContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _torch_dtype(torch: Any, dtype: np.dtype) -> Any:
    return {np.dtype(np.uint8): torch.uint8, np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32,
            np.dtype(np.int64): torch.int64, np.dtype(np.float64): torch.float64}[dtype]


def backend_for(memory: str, device: int = 0) -> ArrayBackend:
    """numpy for 'host'; torch, else cupy, for 'cuda' (MemoryChoiceError naming what to install if neither is)."""
    if memory == "host":
        return ArrayBackend("numpy")
    library = gpu_array_library()
    if library is None:
        raise MemoryChoiceError("CUDA frames need torch or cupy in this process: pip install torch (or cupy-cuda12x)")
    backend = ArrayBackend(library, device)
    _wait_as_the_environment_says(device)
    return backend


@functools.cache
def _wait_as_the_environment_says(device: int) -> None:
    """Once a process and device: the CUDA wait ``ROS2_CUDA_IPC_CUDA_WAIT`` names, if any other than ``auto``, the
    driver's default (a ValueError for a name that is not one)."""
    wait = cuda_wait_from_environment()
    if wait not in (None, "auto"):
        set_cuda_wait(wait, device)
