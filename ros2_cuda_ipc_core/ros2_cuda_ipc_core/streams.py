"""Streams as users hold them: ints, ``cuda.core`` streams, torch / cupy streams."""

from __future__ import annotations

from typing import Any, Union

#: An int ``CUstream`` handle, or any object with ``.handle``, ``.cuda_stream`` or ``.ptr``; None is the
#: legacy default stream.
StreamLike = Union[int, Any, None]  # noqa: UP007 (typing.Any is no class on 3.10)


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
