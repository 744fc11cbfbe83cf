"""Reading a ``BufferCore`` message defensively.

A descriptor comes from the network: every field is checked here, once,
before any socket is opened or any memory touched.  The result is a plain
frozen value the rest of the reader can trust.
"""

from __future__ import annotations

import functools
import operator
import os
from typing import Any

import numpy as np

from ..errors import InvalidDescriptorError
from ..memory.layout import MEMORY_NAMES

_SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_OCTET = np.dtype(np.uint8)

#: (pool_id, socket_path, publisher_pid): one pool instance (see :attr:`Descriptor.instance`).
InstanceKey = tuple[bytes, str, int]


@functools.lru_cache(maxsize=256)  # a reader sees a handful of pools; validate each path once
def socket_address(socket_path: str) -> str:
    """The ``AF_UNIX`` address of a pool's ``socket_path`` ('@name' is the abstract namespace)."""
    if not isinstance(socket_path, str) or not socket_path:
        raise InvalidDescriptorError("socket_path is empty")
    if "\x00" in socket_path:
        raise InvalidDescriptorError("socket_path contains a NUL byte")
    if len(os.fsencode(socket_path)) > _SUN_PATH_MAX:
        raise InvalidDescriptorError(f"socket_path is longer than {_SUN_PATH_MAX} bytes")
    if socket_path.startswith("@"):
        if len(socket_path) == 1:
            raise InvalidDescriptorError("socket_path '@' names no abstract socket")
        return "\x00" + socket_path[1:]
    if not socket_path.startswith("/"):
        raise InvalidDescriptorError(f"socket_path {socket_path!r} is neither absolute nor '@abstract'")
    return socket_path


def _uint(value: Any, name: str, limit: int) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        number = -1
    if not 0 <= number <= limit:
        raise InvalidDescriptorError(f"{name}={value!r} is not an unsigned integer of its field's size")
    return number


def _octets(value: Any, name: str, length: int) -> bytes:
    if type(value) is np.ndarray and value.dtype is _OCTET:
        data = value.tobytes()
    else:  # a duck-typed core: its length first, so that nothing (an int, an iterator) is converted at any size
        try:
            claimed = len(value)
        except TypeError:
            raise InvalidDescriptorError(f"{name} is a {type(value).__name__}, not a byte array") from None
        if claimed != length:
            raise InvalidDescriptorError(f"{name} has {claimed} entries, expected {length} bytes")
        try:
            data = bytes(bytearray(value))
        except (TypeError, ValueError) as exc:
            raise InvalidDescriptorError(f"{name} is not a byte array: {exc}") from None
    if len(data) != length:
        raise InvalidDescriptorError(f"{name} has {len(data)} bytes, expected {length}")
    return data


class Descriptor:
    """A checked ``BufferCore``.  A plain slotted class: it is built for every read (a frozen dataclass
    costs a ``object.__setattr__`` per field)."""

    __slots__ = ("block_id", "byte_size", "device_id", "event_handle", "memory", "pool_id", "publisher_pid",
                 "socket_path", "uid")
    FIELDS = ("socket_path", "pool_id", "block_id", "uid", "publisher_pid", "memory", "device_id", "event_handle",
              "byte_size")

    def __init__(self, socket_path: str, pool_id: bytes, block_id: int, uid: int, publisher_pid: int, memory: int,
                 device_id: int, event_handle: bytes, byte_size: int) -> None:
        self.socket_path = socket_path
        self.pool_id = pool_id
        self.block_id = block_id
        self.uid = uid
        self.publisher_pid = publisher_pid
        self.memory = memory
        self.device_id = device_id
        self.event_handle = event_handle
        self.byte_size = byte_size

    def __repr__(self) -> str:
        return "Descriptor(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self.FIELDS) + ")"

    @classmethod
    def from_message(cls, core: Any) -> Descriptor:
        """Check every field of a ``BufferCore`` (or anything with its attributes)."""
        try:
            socket_path, memory, block_id, uid = core.socket_path, core.memory, core.block_id, core.uid
            publisher_pid, device_id, byte_size = core.publisher_pid, core.device_id, core.byte_size
            pool_id, event_handle = core.pool_id, core.event_handle
        except AttributeError as exc:
            raise InvalidDescriptorError(f"not a BufferCore: {exc}") from None
        if type(socket_path) is not str:
            raise InvalidDescriptorError(f"socket_path is {type(socket_path).__name__}, not str")
        socket_address(socket_path)
        # Deserialized messages hold plain ints: checked in one expression, as this runs for every frame;
        # anything else goes through the field-by-field checks that name the culprit.
        if not (type(memory) is int and type(block_id) is int and type(uid) is int and type(publisher_pid) is int
                and type(device_id) is int and type(byte_size) is int and memory in MEMORY_NAMES
                and 0 <= block_id <= _U32 and 0 <= uid <= _U64 and 0 <= publisher_pid <= _U32
                and 0 <= device_id <= _U32 and 0 <= byte_size <= _U64):
            memory = _uint(memory, "memory", 255)
            if memory not in MEMORY_NAMES:
                raise InvalidDescriptorError(f"memory={memory} is not MEMORY_HOST (0) or MEMORY_CUDA (1)")
            block_id, uid = _uint(block_id, "block_id", _U32), _uint(uid, "uid", _U64)
            publisher_pid, device_id = _uint(publisher_pid, "publisher_pid", _U32), _uint(device_id, "device_id", _U32)
            byte_size = _uint(byte_size, "byte_size", _U64)
        return cls(socket_path, _octets(pool_id, "pool_id", 16), block_id, uid, publisher_pid, memory, device_id,
                   _octets(event_handle, "event_handle", 64), byte_size)

    @property
    def instance(self) -> InstanceKey:
        """The pool instance this descriptor names: (pool_id, socket_path, publisher_pid).  A pool id is public;
        only the three together name one pool of one process, and a reader serves a descriptor from that one only."""
        return (self.pool_id, self.socket_path, self.publisher_pid)

    @property
    def pool_name(self) -> str:
        """How messages name this pool: its socket and the start of its id."""
        return f"pool {self.pool_id.hex()[:8]} at {self.socket_path!r}"
