"""A node's parameters declared once, in a table: what ``--help`` prints and what the node reads at start.

Each node class lists its parameters in ``PARAMETERS`` (a tuple of :class:`NodeParameter`); a subclass
adds its own and may give an inherited one another default.  :func:`parameter_table` merges the
tables along the class hierarchy, :func:`declare` reads one value with the rules every node shares:
an integer is accepted where a number is meant (``fps:=30``), any other type is a
:class:`ParameterError` naming the parameter, in one line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from .errors import Ros2CudaIpcError

if TYPE_CHECKING:
    from rclpy.node import Node

__all__ = ["NodeParameter", "ParameterError", "ParameterValue", "declare", "parameter_table"]

ParameterValue: TypeAlias = "int | float | str | bool"
_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


class ParameterError(Ros2CudaIpcError, ValueError):
    """A node parameter of the wrong type or out of range; the message names it and what it must be."""


@dataclass(frozen=True)
class NodeParameter:
    """One parameter: its name, its default (whose type is the parameter's type) and one line of help."""

    name: str
    default: ParameterValue
    help: str


def parameter_table(node_class: type) -> dict[str, NodeParameter]:
    """Every parameter of ``node_class`` by name, base classes' first; a subclass's entry replaces its base's."""
    table: dict[str, NodeParameter] = {}
    for klass in reversed(node_class.__mro__):
        entries: Iterable[NodeParameter] = klass.__dict__.get("PARAMETERS", ())
        for entry in entries:
            table[entry.name] = entry
    return table


def checked_value(name: str, value: Any, default: ParameterValue) -> ParameterValue:
    """``value`` as ``default``'s type: an int where a float is meant becomes a float; anything else of another
    type is a :class:`ParameterError`."""
    kind = type(default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ParameterError(f"parameter {name} must be {_KINDS[kind]}, not {value!r}")
    return value


def declare(node: Node, name: str) -> Any:
    """Declare ``name`` from ``node``'s table (any type is let through ROS) and return its checked value."""
    from rcl_interfaces.msg import ParameterDescriptor

    entry = parameter_table(type(node)).get(name)
    if entry is None:
        raise KeyError(f"{type(node).__name__} has no parameter {name!r} in its PARAMETERS table")
    value: Any = node.declare_parameter(name, entry.default, ParameterDescriptor(dynamic_typing=True,
                                                                           description=entry.help)).value
    return checked_value(name, value, entry.default)
