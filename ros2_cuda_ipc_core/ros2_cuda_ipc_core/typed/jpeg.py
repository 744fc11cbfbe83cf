"""JPEG encoding of an 8-bit image array: on the GPU (nvJPEG, through torchvision) for CUDA memory, else Pillow.

Used by the compressed image twins of typed publishers and by the bag recorder.  A CUDA array is encoded
where it lies, so the raw frame never crosses to the host; a host array (numpy, or anything numpy can
view) is handed to Pillow without a copy when its rows are dense.  Neither library is imported before
the first encode, so a process that never encodes pays nothing.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

import numpy as np

from ..errors import Ros2CudaIpcError
from ..memory.streams import StreamLike, stream_handle

#: Channel orders an 8-bit image can be encoded from, and which of its channels make RGB (or gray).
ChannelOrder = Literal["rgb", "bgr", "rgba", "bgra", "mono"]
_RGB_INDEX: dict[str, tuple[int, ...]] = {"rgb": (0, 1, 2), "bgr": (2, 1, 0), "rgba": (0, 1, 2), "bgra": (2, 1, 0),
                                          "mono": (0,)}
_CHANNELS = {"rgb": 3, "bgr": 3, "rgba": 4, "bgra": 4, "mono": 1}

__all__ = ["ChannelOrder", "JpegUnavailableError", "encode_jpeg", "jpeg_backend", "warm_up_jpeg"]


class JpegUnavailableError(Ros2CudaIpcError):
    """No JPEG encoder for this memory: install Pillow (host) or torchvision (CUDA, or either)."""


def jpeg_backend(memory: str) -> str | None:
    """Which library would encode an array in ``memory`` ('host' or 'cuda'): 'torchvision', 'pillow' or None.

    CUDA memory without torchvision is downloaded once and encoded with Pillow.
    """
    torchvision = importlib.util.find_spec("torchvision") is not None
    if memory == "cuda" and torchvision:
        return "torchvision"
    if importlib.util.find_spec("PIL") is not None:
        return "pillow"
    return "torchvision" if torchvision else None


def encode_jpeg(image: Any, order: ChannelOrder, quality: int = 80, *, stream: StreamLike = None) -> bytes:
    """The JPEG file of ``image``: (rows, cols[, channels]) uint8, channels as ``order`` says (alpha is dropped).

    ``image`` is a numpy array, or a CUDA array (DLPack or the CUDA array interface), whose pending work
    is ordered on ``stream``.  ``quality`` is 1 to 100.  Raises :class:`JpegUnavailableError` when no
    encoder is installed, ValueError for an array it cannot encode.
    """
    if not 1 <= int(quality) <= 100:
        raise ValueError(f"JPEG quality {quality} is outside 1..100")
    if order not in _CHANNELS:
        raise ValueError(f"channel order {order!r} is none of {sorted(_CHANNELS)}")
    on_cuda = hasattr(image, "__cuda_array_interface__") or (
        hasattr(image, "__dlpack_device__") and image.__dlpack_device__()[0] != 1)
    backend = jpeg_backend("cuda" if on_cuda else "host")
    if backend is None:
        raise JpegUnavailableError("no JPEG encoder is installed: pip install Pillow (or torchvision, which also "
                                   "encodes CUDA frames on the GPU)")
    if backend == "torchvision":
        return _encode_torchvision(image, order, int(quality), stream_handle(stream) if on_cuda else None)
    host = _host_array(image, on_cuda, stream)
    return _encode_pillow(host, order, int(quality))


def warm_up_jpeg(memory: str, cuda_device: int = 0) -> str | None:
    """Load the encoder :func:`encode_jpeg` would use for ``memory`` and encode one tiny picture with it.

    The first encode pays for the library's import and, on the GPU, torch's CUDA start and nvJPEG's
    handle: seconds, not the frame's milliseconds.  Calling this first (the twins do on their first
    compressed subscriber, the recorder before it subscribes) keeps that out of any frame's time.
    Returns the backend's name, None when no encoder is installed.
    """
    backend = jpeg_backend(memory)
    if backend == "torchvision" and memory == "cuda":
        import torch

        with torch.cuda.device(cuda_device):
            encode_jpeg(torch.zeros((16, 16, 3), dtype=torch.uint8, device=f"cuda:{cuda_device}"), "rgb")
            torch.cuda.synchronize()
    elif backend is not None:
        encode_jpeg(np.zeros((16, 16, 3), np.uint8), "rgb")
    return backend


def _checked_shape(shape: tuple[int, ...], dtype: Any, order: str) -> None:
    channels = 1 if len(shape) == 2 else (shape[2] if len(shape) == 3 else -1)
    if np.dtype(dtype) != np.uint8 or channels != _CHANNELS[order]:
        raise ValueError(f"a {shape} {np.dtype(dtype)} array is no {order} 8-bit image to encode as JPEG")


def _host_array(image: Any, on_cuda: bool, stream: StreamLike) -> np.ndarray:
    if not on_cuda:
        return np.asarray(image)
    from ..memory.transfer import copy_strided
    from .source import strided_source  # a CUDA frame without torchvision: one download

    source = strided_source(image)
    host = np.empty(source.layout.shape, source.layout.dtype)
    copy_strided(host.ctypes.data, host.strides, source.address, source.layout.strides, host.shape,
                 host.dtype.itemsize, source.device_id or 0, stream)
    return host


def _encode_pillow(host: np.ndarray, order: str, quality: int) -> bytes:
    import io

    from PIL import Image

    _checked_shape(host.shape, host.dtype, order)
    if host.ndim == 3:
        host = host[:, :, list(_RGB_INDEX[order])] if order != "rgb" else host
        if host.shape[2] == 1:
            host = host[:, :, 0]
    picture = Image.fromarray(np.ascontiguousarray(host), mode="L" if host.ndim == 2 else "RGB")
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def _encode_torchvision(image: Any, order: str, quality: int, stream: int | None) -> bytes:
    import torch
    import torchvision.io

    def encode() -> bytes:
        tensor = torch.from_dlpack(image) if stream is not None else torch.from_numpy(np.asarray(image))
        _checked_shape(tuple(tensor.shape), np.uint8 if tensor.dtype == torch.uint8 else np.float32, order)
        chw = tensor.unsqueeze(0) if tensor.ndim == 2 else tensor.permute(2, 0, 1)
        chw = chw[list(_RGB_INDEX[order])].contiguous()
        return bytes(torchvision.io.encode_jpeg(chw, quality=quality).cpu().numpy().tobytes())

    if not stream:  # host memory, or CUDA work ordered on the legacy default stream
        return encode()
    with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
        return encode()
