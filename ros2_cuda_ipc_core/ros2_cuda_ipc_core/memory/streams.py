"""Streams as users hold them: ints, ``cuda.core`` streams, torch / cupy streams."""

from __future__ import annotations

from typing import Protocol, SupportsInt


class TorchStream(Protocol):
    """``torch.cuda.Stream``: the ``CUstream`` address is ``.cuda_stream``."""

    @property
    def cuda_stream(self) -> int: ...


class CupyStream(Protocol):
    """``cupy.cuda.Stream``: the ``CUstream`` address is ``.ptr``."""

    @property
    def ptr(self) -> int: ...


class CudaCoreStream(Protocol):
    """``cuda.core`` streams: ``.handle`` is a ``CUstream`` that converts to its address."""

    @property
    def handle(self) -> SupportsInt: ...


class CudaStreamProtocol(Protocol):
    """cuda.core's stream protocol: ``__cuda_stream__()`` returns ``(version, address)``."""

    def __cuda_stream__(self) -> tuple[int, int]: ...


#: What every ``stream=`` parameter takes: None (the legacy default stream), an int ``CUstream`` address,
#: or a torch, cupy or cuda.core stream object.
StreamLike = int | TorchStream | CupyStream | CudaCoreStream | CudaStreamProtocol | None


def stream_handle(stream: StreamLike) -> int:
    """The raw ``CUstream`` address of ``stream`` (0 for None, the legacy default stream)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    handle = getattr(stream, "handle", None)  # cuda.core Stream
    if handle is not None:
        return int(handle)
    protocol = getattr(stream, "__cuda_stream__", None)  # cuda.core's stream protocol: (version, address)
    if callable(protocol):
        return int(protocol()[1])
    raise TypeError(f"cannot use {type(stream).__name__} as a CUDA stream: pass an int handle, a cuda.core Stream, "
                    "or an object with .cuda_stream or .ptr")
