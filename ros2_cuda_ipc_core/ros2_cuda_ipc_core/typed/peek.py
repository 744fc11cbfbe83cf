"""A serialized typed message read without deserializing it: its header, its core, and a key to the rest.

A typed topic's messages repeat every field but ``header`` and ``core`` (the layout) from frame to frame, and turning
the CDR into a Python message costs the executor's thread 70-250 µs after an idle gap: rosidl's constructors and
checked setters for every field, nested ones included.  So a typed subscription takes DDS messages serialized and
reads here the fields that change (:func:`peek_message`, tens of µs): a message whose other fields are byte for byte
those of one deserialized before (:class:`Templates`) is that template with this header and core, and a copy of a
frame the direct path delivered already is dropped.  The walk follows the message type's own field list (rosidl),
reads only what the bytes hold (every length checked against what is left) and answers None for anything it does
not know (another encapsulation, a truncated buffer, a type without a top-level ``header`` and ``core``): the
caller then deserializes.
"""

from __future__ import annotations

import functools
import importlib
import re
import struct
from typing import Any, NamedTuple

from ..direct.wire import MAX_TEMPLATE_BYTES
from ..errors import InvalidDescriptorError
from ..pool.descriptor import Descriptor

_CDR_LE = b"\x00\x01"  # XCDR1, little endian: what Fast DDS writes for ROS 2 types
_PRIMITIVE = {"bool": 1, "boolean": 1, "byte": 1, "char": 1, "octet": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2,
              "int32": 4, "uint32": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8}
_SEQUENCE = re.compile(r"sequence<(.+?)(?:, *\d+)?>")
_ARRAY = re.compile(r"(.+)\[(\d+)\]")
_U32, _U64, _STAMP = struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<iI")
_HEADER_TYPE, _CORE_TYPE = "std_msgs/Header", "ros2_cuda_ipc_msgs/BufferCore"
_TEMPLATES = 32  # per subscription: a topic has one layout per publisher, rarely more


class _Unknown(Exception):
    """The bytes or the type are not what the walk knows: deserialize instead."""


class Publication(NamedTuple):
    """What :func:`peek_message` read: the header's fields, the core (bounded by the CDR's own types, not yet
    checked: :class:`Templates` checks the fields that key a template), and ``template_key``: every other byte."""

    sec: int
    nanosec: int
    frame_id: str
    core: Descriptor
    template_key: tuple[Any, ...]


def peek_message(data: bytes, message_type: type) -> Publication | None:
    """The header, core and template key of the serialized ``message_type`` ``data``; None if it cannot tell."""
    plan = _message_plan(message_type)
    if plan is None or data[:2] != _CDR_LE:
        return None
    try:
        pos, header, core = 4, None, None
        rest: list[Any] = []
        for kind, steps in plan:
            if kind == "header":
                header, pos = _read_header(data, pos)
            elif kind == "core":
                core, pos = _read_core(data, pos)
            else:
                start, pos = pos, _run(steps, data, pos)
                rest.append(((start - 4) % 8, data[start:pos]))  # the same bytes at another alignment differ
        # What follows the last field (the serializer's padding) is read by no deserializer: not in the key.
    except (_Unknown, struct.error, IndexError, UnicodeDecodeError):
        return None
    assert header is not None and core is not None  # the plan has both
    constant = (core.socket_path, core.pool_id, core.publisher_pid, core.memory, core.device_id, core.byte_size)
    return Publication(*header, core, (constant, *rest))


class Templates:
    """The messages of one subscription whose fields other than ``header`` and ``core`` later DDS copies repeat, with
    their layouts: ``layout_of(message)`` once per template (it checks the message type and the layout), the core's
    constant fields by :meth:`Descriptor.from_message`.  At most 32, forgotten all at once when full, each of at
    most 64 KiB of layout fields, as a direct template: a larger message is read, not kept."""

    def __init__(self, layout_of: Any) -> None:
        self._layout_of = layout_of
        self._known: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def get(self, key: tuple[Any, ...]) -> tuple[Any, Any] | None:
        """(template message, its checked layout) for a publication's ``template_key``; None if not learnt."""
        return self._known.get(key)

    def learn(self, peeked: Publication, message: Any) -> Any:
        """Remember ``message``, deserialized from the bytes ``peeked`` was read from, as the template of
        ``peeked.template_key``; its layout, or None for a message that does not check out (its read says why, as
        for any message) or whose header and core the peek read otherwise than rclpy: crafted bytes that two CDR
        readers take apart differently teach nothing, so a template's checks always hold for the core its key
        was made of."""
        try:
            core = Descriptor.from_message(message.core)
            layout = self._layout_of(message)
        except (InvalidDescriptorError, TypeError):
            return None
        stamp = message.header.stamp
        if (peeked.sec, peeked.nanosec, peeked.frame_id) != (stamp.sec, stamp.nanosec, message.header.frame_id) \
                or any(getattr(peeked.core, name) != getattr(core, name) for name in Descriptor.FIELDS):
            return None
        if sum(len(part) for _, part in peeked.template_key[1:]) > MAX_TEMPLATE_BYTES:
            return layout  # a peer's megabytes of field names are not held 32 times over
        if len(self._known) >= _TEMPLATES:
            self._known.clear()
        self._known[peeked.template_key] = (message, layout)
        return layout


def _read_string(data: bytes, pos: int) -> tuple[str, int]:
    """A CDR string at ``pos``: its text (NUL-terminated, no NUL inside) and the position after it."""
    at = _aligned(pos, 4)
    length, = _U32.unpack_from(data, at)
    at += 4
    if length == 0 or at + length > len(data) or data[at + length - 1] != 0:
        raise _Unknown("not a terminated string")
    raw = data[at:at + length - 1]
    if b"\0" in raw:
        raise _Unknown("a NUL inside a string")
    return raw.decode(), at + length


def _read_header(data: bytes, pos: int) -> tuple[tuple[int, int, str], int]:
    at = _aligned(pos, 4)
    sec, nanosec = _STAMP.unpack_from(data, at)
    frame_id, pos = _read_string(data, at + 8)
    return (sec, nanosec, frame_id), pos


def _read_core(data: bytes, pos: int) -> tuple[Descriptor, int]:
    socket_path, pos = _read_string(data, pos)
    pool_id = data[pos:pos + 16]
    at = _aligned(pos + 16, 4)
    block_id, = _U32.unpack_from(data, at)
    at = _aligned(at + 4, 8)
    uid, = _U64.unpack_from(data, at)
    publisher_pid, = _U32.unpack_from(data, at + 8)
    memory = data[at + 12]
    at = _aligned(at + 13, 4)
    device_id, = _U32.unpack_from(data, at)
    event_handle = data[at + 4:at + 68]
    at = _aligned(at + 68, 8)
    byte_size, = _U64.unpack_from(data, at)
    if len(pool_id) != 16 or len(event_handle) != 64:
        raise _Unknown("past the end")
    return Descriptor(socket_path, pool_id, block_id, uid, publisher_pid, memory, device_id, event_handle,
                      byte_size), at + 8


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
            elif kind == _PRIMITIVES and count:  # Fast CDR aligns a sequence's elements, not an empty one
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
def _message_plan(message_type: type) -> tuple[tuple[str, Plan], ...] | None:
    """The message's fields in order as ("header", ()), ("core", ()) or ("rest", steps that skip a run of others);
    None for a type without a top-level ``header`` and ``core`` of the expected types."""
    plan: list[tuple[str, Plan]] = []
    try:
        for name, kind in _fields(message_type):
            if (name, kind) in (("header", _HEADER_TYPE), ("core", _CORE_TYPE)):
                plan.append((name, ()))
            elif plan and plan[-1][0] == "rest":
                plan[-1] = ("rest", plan[-1][1] + _plan(kind))
            else:
                plan.append(("rest", _plan(kind)))
    except (_Unknown, AttributeError):
        return None
    names = [name for name, _ in plan]
    return tuple(plan) if names.count("header") == 1 and names.count("core") == 1 else None


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
