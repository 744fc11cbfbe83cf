"""Whether CUDA is usable here, asked once, without ever failing an import; and checked driver calls.

``cuda.bindings`` raises a ``RuntimeError`` subclass from every driver call when no driver is
loaded; we turn that into a reason string, and into ``CudaUnavailableError`` where CUDA was really
required.  A call that fails on a working driver raises ``CudaDriverError`` naming the call and
its ``CUresult``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import CudaDriverError, CudaUnavailableError


def check(result: Any, call: str) -> Any:
    """Unwrap a ``cuda.bindings`` ``(CUresult, *values)`` tuple of driver call ``call``; raise on an error code."""
    err, *values = result
    if int(err) != 0:
        raise CudaDriverError(call, int(err), getattr(err, "name", None) or f"CUresult {int(err)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def driver_call(function: Callable[..., Any], *args: Any) -> Any:
    """Call a ``cuda.bindings.driver`` function and unwrap its result; a failure names ``function``."""
    return check(function(*args), function.__name__)


@functools.cache
def unavailable_reason(device: int = 0) -> str | None:
    """None when CUDA device ``device`` is usable here, else why not (for logs and errors)."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        return f"cuda-python is not installed ({exc}); pip install cuda-bindings cuda-core"
    try:
        driver_call(driver.cuInit, 0)
        count = driver_call(driver.cuDeviceGetCount)
    except (RuntimeError, CudaDriverError) as exc:
        return f"no usable CUDA driver ({exc})"
    if device >= count:
        return f"CUDA device {device} does not exist (this machine has {count})"
    return None


@functools.cache
def device_count() -> int:
    """CUDA devices on this machine (0 without a usable driver)."""
    if unavailable_reason(0) is not None:
        return 0
    from cuda.bindings import driver

    return int(driver_call(driver.cuDeviceGetCount))


def require_cuda(device: int) -> None:
    reason = unavailable_reason(device)
    if reason is not None:
        raise CudaUnavailableError(reason)
