"""A serialized typed message's pool instance and publication uid, read without deserializing it.

A direct subscription (DESIGN §14) gets most frames on its pool connection first; the DDS copy that follows
is a duplicate, and turning it into a Python message costs the executor's thread hundreds of microseconds of
GIL that the delivery thread then waits for.  So its DDS subscription takes the serialized bytes and peeks at
the ``core`` field here: a duplicate is dropped at the cost of walking the CDR (tens of µs), anything else is
deserialized as before.  The walk follows the message type's own field list (rosidl), reads only what the
bytes hold (every length checked against what is left) and answers None for anything it does not know
(another encapsulation, a truncated buffer): the caller then deserializes.
"""

from __future__ import annotations

import functools
import importlib
import re
import struct
from typing import Any

from ..pool.descriptor import InstanceKey

_CDR_LE = b"\x00\x01"  # XCDR1, little endian: what Fast DDS writes for ROS 2 types
_PRIMITIVE = {"bool": 1, "boolean": 1, "byte": 1, "char": 1, "octet": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2,
              "int32": 4, "uint32": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8}
_SEQUENCE = re.compile(r"sequence<(.+?)(?:, *\d+)?>")
_ARRAY = re.compile(r"(.+)\[(\d+)\]")
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


class _Unknown(Exception):
    """The bytes or the type are not what the walk knows: deserialize instead."""


def peek_publication(data: bytes, message_type: type) -> tuple[InstanceKey, int] | None:
    """(pool instance, uid) of the ``core`` of the serialized ``message_type`` ``data``; None if it cannot tell."""
    if data[:2] != _CDR_LE:
        return None
    try:
        pos = _run(_plan_to_core(message_type), data, 4)
        length = _U32.unpack_from(data, _aligned(pos, 4))[0]  # core.socket_path
        pos = _aligned(pos, 4) + 4
        if length == 0 or pos + length + 16 > len(data):
            return None
        socket_path = data[pos:pos + length - 1].decode()
        pool_id = data[pos + length:pos + length + 16]
        pos = _aligned(pos + length + 16, 4) + 4  # block_id
        uid_at = _aligned(pos, 8)
        uid, = _U64.unpack_from(data, uid_at)
        publisher_pid, = _U32.unpack_from(data, uid_at + 8)
    except (_Unknown, struct.error, UnicodeDecodeError):
        return None
    return (pool_id, socket_path, publisher_pid), uid


def _aligned(pos: int, align: int) -> int:
    """``pos`` rounded up to ``align``, counted from the end of the 4-byte encapsulation header."""
    return pos + (-(pos - 4)) % align


#: The steps that skip a field: (FIXED, size, align), (STRING,), (PRIMITIVES, element size) for a sequence of
#: primitives, (STRUCTS, steps) for a sequence of messages; arrays and nested messages are unrolled.
_FIXED, _STRING, _PRIMITIVES, _STRUCTS = range(4)
Plan = tuple[tuple[Any, ...], ...]


def _run(plan: Plan, data: bytes, pos: int) -> int:
    end = len(data)
    for step in plan:
        kind = step[0]
        if kind == _FIXED:
            pos = _aligned(pos, step[2]) + step[1]
        else:
            at = _aligned(pos, 4)
            if at + 4 > end:
                raise _Unknown("past the end")
            count, = _U32.unpack_from(data, at)
            pos = at + 4
            if kind == _STRING:
                pos += count
            elif kind == _PRIMITIVES:
                pos = _aligned(pos, step[1]) + count * step[1]
            else:
                if count > end - pos:  # every element takes a byte at least
                    raise _Unknown("a count beyond the message")
                for _ in range(count):
                    pos = _run(step[1], data, pos)
        if pos > end:
            raise _Unknown("past the end")
    return pos


@functools.cache
def _plan_to_core(message_type: type) -> Plan:
    """The steps over the fields before ``core``."""
    steps: list[tuple[Any, ...]] = []
    for name, kind in _fields(message_type):
        if name == "core":
            return tuple(steps)
        steps.extend(_plan(kind))
    raise _Unknown(f"{message_type.__name__} has no core")


@functools.cache
def _plan(kind: str) -> Plan:
    size = _PRIMITIVE.get(kind)
    if size is not None:
        return ((_FIXED, size, size),)
    if kind == "string" or kind.startswith("string<"):
        return ((_STRING,),)
    if (match := _SEQUENCE.fullmatch(kind)) is not None:
        element = _PRIMITIVE.get(match[1])
        return ((_PRIMITIVES, element),) if element is not None else ((_STRUCTS, _plan(match[1])),)
    if (match := _ARRAY.fullmatch(kind)) is not None:
        element = _PRIMITIVE.get(match[1])
        if element is not None:
            return ((_FIXED, element * int(match[2]), element),)
        return _plan(match[1]) * int(match[2])
    if "/" in kind:
        return tuple(step for _name, field_kind in _fields(_message_class(kind)) for step in _plan(field_kind))
    raise _Unknown(kind)


@functools.cache
def _fields(message_type: type) -> tuple[tuple[str, str], ...]:
    return tuple(message_type.get_fields_and_field_types().items())  # type: ignore[attr-defined]


@functools.cache
def _message_class(kind: str) -> Any:
    package, _, name = kind.partition("/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError):
        raise _Unknown(kind) from None
