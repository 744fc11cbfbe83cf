"""CUDA contexts: every driver call of ours runs in the device's primary context, the caller's left alone.

torch, cupy and cuda.core all use the primary context of a device, and follow the thread's
current context; reading a block of GPU 1 must not switch a caller working on GPU 0.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from .cuda_driver import driver_call, require_cuda


def driver() -> Any:
    """The ``cuda.bindings.driver`` module (imported late: CUDA is optional)."""
    from cuda.bindings import driver

    return driver


@functools.cache
def primary_context(device: int) -> Any:
    """The device's primary context (the one torch, cupy and cuda.core use), retained for the process."""
    require_cuda(device)
    cu = driver()
    return driver_call(cu.cuDevicePrimaryCtxRetain, driver_call(cu.cuDeviceGet, device))


@contextlib.contextmanager
def on_device(device: int) -> Iterator[None]:
    """Run driver calls in ``device``'s primary context and leave the caller's current context as it was
    (torch and cupy follow the thread's current context: reading from GPU 1 must not switch them to it)."""
    cu = driver()
    ctx = primary_context(device)
    current = int(driver_call(cu.cuCtxGetCurrent))
    if current == int(ctx):
        yield
        return
    if current == 0 and device == 0:  # what the runtime would make current itself: keep it, skip push/pop
        driver_call(cu.cuCtxSetCurrent, ctx)
        yield
        return
    driver_call(cu.cuCtxPushCurrent, ctx)
    try:
        yield
    finally:
        cu.cuCtxPopCurrent()


def make_current(device: int) -> None:
    """For threads of our own only: make ``device``'s primary context current and leave it so."""
    cu = driver()
    ctx = primary_context(device)
    if int(driver_call(cu.cuCtxGetCurrent)) != int(ctx):
        driver_call(cu.cuCtxSetCurrent, ctx)
