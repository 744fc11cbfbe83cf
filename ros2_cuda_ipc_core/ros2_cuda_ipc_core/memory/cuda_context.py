"""CUDA contexts: a driver call of ours that needs a context runs in the device's primary one, the caller's left alone.

torch, cupy and cuda.core all use the primary context of a device, and follow the thread's
current context; reading a block of GPU 1 must not switch a caller working on GPU 0.

Calls on an explicit stream or event need no current context at all (the handle names its own;
checked on the H200, driver 580): the per-frame calls skip the context dance for them, which
costs 15 to 30 us a frame at camera rates.  The legacy and per-thread default streams (0, 1, 2)
mean "the current context's", so calls on them still run inside ``on_device``.

How a thread waits for the GPU is the primary context's too (:func:`set_cuda_wait`): the driver's default spins
whenever a process has fewer contexts than the machine has cores, so every synchronize of a node costs CPU for as
long as the GPU takes, time-sliced among a dozen processes or not.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any

from .cuda_driver import driver_call, require_cuda

_driver_module: Any = None


def driver() -> Any:
    """The ``cuda.bindings.driver`` module, imported on first use (CUDA is optional), then kept: an import
    statement runs importlib's Python on every call, several times per frame."""
    global _driver_module
    if _driver_module is None:
        from cuda.bindings import driver as module

        _driver_module = module
    return _driver_module


@functools.cache
def primary_context(device: int) -> Any:
    """The device's primary context (the one torch, cupy and cuda.core use), retained for the process."""
    require_cuda(device)
    cu = driver()
    return driver_call(cu.cuDevicePrimaryCtxRetain, driver_call(cu.cuDeviceGet, device))


class on_device:  # lower case: used like the context-manager function it replaced
    """Run driver calls in ``device``'s primary context and leave the caller's current context as it was
    (torch and cupy follow the thread's current context: reading from GPU 1 must not switch them to it).

    A class rather than a generator context manager: it runs several times for every frame read.
    """

    __slots__ = ("_ctx", "_device", "_pushed")

    def __init__(self, device: int) -> None:
        self._device = device
        self._ctx = primary_context(device)
        self._pushed = False

    def __enter__(self) -> None:
        cu = driver()
        current = int(driver_call(cu.cuCtxGetCurrent))
        if current == int(self._ctx):
            return
        if current == 0 and self._device == 0:  # what the runtime would make current itself: keep it, no push/pop
            driver_call(cu.cuCtxSetCurrent, self._ctx)
            return
        driver_call(cu.cuCtxPushCurrent, self._ctx)
        self._pushed = True

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            driver().cuCtxPopCurrent()


#: Stream handles that name no context of their own: the legacy (0, 1) and per-thread (2) default streams.
DEFAULT_STREAMS = frozenset((0, 1, 2))


#: What ``context_for`` returns for an explicit stream: nothing to switch (stateless, so shared by every thread).
_NO_CONTEXT: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def context_for(stream: int, device: int) -> contextlib.AbstractContextManager[None]:
    """The context a call on ``stream`` needs: ``device``'s primary one for a default stream, none otherwise."""
    return on_device(device) if stream in DEFAULT_STREAMS else _NO_CONTEXT


def make_current(device: int) -> None:
    """For threads of our own only: make ``device``'s primary context current and leave it so."""
    cu = driver()
    ctx = primary_context(device)
    if int(driver_call(cu.cuCtxGetCurrent)) != int(ctx):
        driver_call(cu.cuCtxSetCurrent, ctx)


#: How a thread waits for the GPU (a stream's or an event's synchronize, a copy to pageable host memory): the driver's
#: scheduling choices (``CU_CTX_SCHED_*``), by name.  ``auto`` spins while the process has fewer contexts than the
#: machine has cores, else yields; ``blocking`` sleeps on a primitive the GPU's interrupt wakes (no CPU, a few
#: microseconds more latency).
CUDA_WAITS = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}
_SCHED_MASK = 0x07
#: The environment variable naming the wait of a node process's GPU work (unset: ``auto``, the driver's default).
CUDA_WAIT_ENVIRONMENT = "ROS2_CUDA_IPC_CUDA_WAIT"


def check_cuda_wait(wait: str) -> str:
    """``wait`` if it is one of :data:`CUDA_WAITS`, else a ValueError naming them (no CUDA needed)."""
    if wait not in CUDA_WAITS:
        raise ValueError(f"CUDA wait {wait[:40]!r}: one of {', '.join(CUDA_WAITS)}")
    return wait


def cuda_wait_from_environment() -> str | None:
    """The wait :data:`CUDA_WAIT_ENVIRONMENT` names, or None where it is unset or empty; a ValueError naming the
    variable for another name."""
    wait = os.environ.get(CUDA_WAIT_ENVIRONMENT, "").strip()
    if not wait:
        return None
    try:
        return check_cuda_wait(wait)
    except ValueError as exc:
        raise ValueError(f"{CUDA_WAIT_ENVIRONMENT}: {exc}") from None


def set_cuda_wait(wait: str, device: int = 0) -> None:
    """Make every thread of this process wait for ``device``'s work as ``wait`` says (one of :data:`CUDA_WAITS`):
    the scheduling flag of its primary context, which torch, cupy and this library share, whether or not one of
    them made the context already (``cuCtxSetFlags``, CUDA 12.1 and later); its other flags are kept."""
    flag = CUDA_WAITS[check_cuda_wait(wait)]
    cu = driver()
    with on_device(device):
        flags = int(driver_call(cu.cuCtxGetFlags))
        driver_call(cu.cuCtxSetFlags, (flags & ~_SCHED_MASK) | flag)


def cuda_wait(device: int = 0) -> str:
    """How this process's threads wait for ``device``'s work now: a name of :data:`CUDA_WAITS`."""
    cu = driver()
    with on_device(device):
        flag = int(driver_call(cu.cuCtxGetFlags)) & _SCHED_MASK
    return next((name for name, value in CUDA_WAITS.items() if value == flag), "auto")
