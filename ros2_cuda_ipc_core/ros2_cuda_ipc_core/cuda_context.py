"""CUDA contexts: a driver call of ours that needs a context runs in the device's primary one, the caller's left alone.

torch, cupy and cuda.core all use the primary context of a device, and follow the thread's
current context; reading a block of GPU 1 must not switch a caller working on GPU 0.

Calls on an explicit stream or event need no current context at all (the handle names its own;
checked on the H200, driver 580): the per-frame calls skip the context dance for them, which
costs 15 to 30 us a frame at camera rates.  The legacy and per-thread default streams (0, 1, 2)
mean "the current context's", so calls on them still run inside ``on_device``.
"""

from __future__ import annotations

import contextlib
import functools
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
