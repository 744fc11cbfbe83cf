"""Whether CUDA is usable here, asked once, without ever failing an import.

``cuda.bindings`` raises a ``RuntimeError`` subclass from every driver call
when no driver is loaded; we turn that into a reason string, and into
``CudaUnavailableError`` where CUDA was really required.
"""

from __future__ import annotations

import functools
from typing import Any

from .errors import CudaUnavailableError


def check(result: Any) -> Any:
    """Unwrap a ``cuda.bindings`` ``(CUresult, *values)`` tuple, raising on an error code."""
    err, *values = result
    if int(err) != 0:
        from cuda.bindings import driver

        name = driver.cuGetErrorName(err)[1]
        raise CudaUnavailableError(f"CUDA driver call failed: {name.decode() if name else int(err)}")
    return values[0] if len(values) == 1 else tuple(values)


@functools.cache
def unavailable_reason(device: int = 0) -> str | None:
    """None when CUDA device ``device`` is usable here, else why not (for logs and errors)."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        return f"cuda-python is not installed ({exc}); pip install cuda-bindings cuda-core"
    try:
        check(driver.cuInit(0))
        count = check(driver.cuDeviceGetCount())
    except (RuntimeError, CudaUnavailableError) as exc:
        return f"no usable CUDA driver ({exc})"
    if device >= count:
        return f"CUDA device {device} does not exist (this machine has {count})"
    return None


def require_cuda(device: int) -> None:
    reason = unavailable_reason(device)
    if reason is not None:
        raise CudaUnavailableError(reason)

