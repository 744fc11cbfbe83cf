"""The error model: one base class, and one subclass per thing a caller can act on."""

from __future__ import annotations


class Ros2CudaIpcError(Exception):
    """Base class of every error this project raises on purpose."""


class InvalidDescriptorError(Ros2CudaIpcError, ValueError):
    """A descriptor (or the pool it names) is malformed: fields out of range, unknown layout, beyond the pool."""


class PoolIdentityError(InvalidDescriptorError):
    """A descriptor's claims about its pool instance disagree with each other or with what answers at its socket
    (publisher pid, socket name, the server's credentials, the pool's own header): refused, never served from
    another instance's memory.  A pool id is public, so it alone authenticates nothing."""


class StaleDescriptorError(Ros2CudaIpcError):
    """The block was reused or is being rewritten: the frame this descriptor named is gone. Drop it."""


class PoolUnavailableError(Ros2CudaIpcError):
    """The pool cannot be reached: its socket is gone, refused us, or its publisher died."""


class IdentityUnverifiableError(PoolUnavailableError):
    """The process serving a pool's socket lives in another pid namespace and the kernel would not say which
    process it is (``/proc`` hidden or absent): a typed subscription reads its CPU twin instead, saying why."""


class CudaUnavailableError(Ros2CudaIpcError):
    """CUDA memory was asked for, but no usable driver or device is here."""


class CudaDriverError(Ros2CudaIpcError):
    """A CUDA driver call failed although a driver and device are here; names the call and its ``CUresult``."""

    def __init__(self, call: str, result: int, result_name: str) -> None:
        super().__init__(f"CUDA driver call {call} failed: {result_name} ({result})")
        self.call = call
        self.result = result
        self.result_name = result_name

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:  # picklable across processes
        return (type(self), (self.call, self.result, self.result_name))


class DeviceMismatchError(Ros2CudaIpcError, ValueError):
    """A stream (or tensor) lives on another device than the block."""
