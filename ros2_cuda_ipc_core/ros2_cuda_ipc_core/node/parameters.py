"""A node's parameters declared once, in a table: what ``--help`` prints and what the node reads at start.

Each node class lists its parameters in ``PARAMETERS`` (a tuple of :class:`NodeParameter`); a subclass
adds its own and may give an inherited one another default.  :func:`parameter_table` merges the
tables along the class hierarchy, :func:`declare` reads one value with the rules every node shares:
an integer is accepted where a number is meant (``fps:=30``), any other type is a
:class:`ParameterError` naming the parameter, in one line; :func:`positive` and :func:`not_negative` check
one value each, so that a refusal names that parameter alone.  :func:`warn_unknown_parameters` says which
``-p NAME:=VALUE`` no parameter of the node took (``widht``), and the closest name it has.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import Ros2CudaIpcError

if TYPE_CHECKING:
    from rclpy.node import Node

__all__ = ["NodeParameter", "ParameterError", "ParameterValue", "declare", "not_negative", "parameter_table", "positive",
           "unknown_parameters", "warn_unknown_parameters"]

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


def positive(name: str, value: float) -> float:
    """``value`` if it is a finite number above 0, else a :class:`ParameterError` naming ``name`` alone."""
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, not {value!r}")
    return value


def not_negative(name: str, value: float) -> float:
    """``value`` if it is a finite number of 0 or more, else a :class:`ParameterError` naming ``name`` alone."""
    if not math.isfinite(value) or value < 0:
        raise ParameterError(f"{name} must be a finite number >= 0, not {value!r}")
    return value


#: Overrides any node may be given without declaring them (rclpy's own, and QoS overrides by prefix).
_ALWAYS_TAKEN = ("use_sim_time", "start_type_description_service", "qos_overrides.")
_SHOWN = 64  # characters of an unknown name a warning shows


def unknown_parameters(node: Node) -> dict[str, str | None]:
    """Each parameter override given to ``node`` (``-p``, a params file, a container's ``--param``) that it has not
    declared, with its closest declared name (None if none is close): a misspelled parameter does nothing."""
    overrides: Iterable[str] = getattr(node, "_parameter_overrides", {})  # rclpy keeps no public list of them
    declared = list(node.list_parameters([], 0).names)
    unknown = sorted(name for name in overrides if name not in declared and not name.startswith(_ALWAYS_TAKEN))
    return {name: next(iter(difflib.get_close_matches(name, declared, n=1, cutoff=0.6)), None) for name in unknown}


def warn_unknown_parameters(node: Node) -> dict[str, str | None]:
    """Log one warning per parameter :func:`unknown_parameters` finds, naming the closest known one; returns them."""
    unknown = unknown_parameters(node)
    for name, closest in unknown.items():
        hint = f"did you mean {closest!r}?" if closest else f"{type(node).__name__} has no such parameter"
        shown = name if len(name) <= _SHOWN else f"{name[:_SHOWN]}..."
        node.get_logger().warning(f"parameter {shown!r} is ignored: {hint} (--help lists them)")
    return unknown
