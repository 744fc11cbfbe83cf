"""Components by ``package::Class`` name: the ``ros2_cuda_ipc.components`` entry-point group.

A package makes a node class loadable by the container with one line in its ``setup.py``::

    entry_points={"ros2_cuda_ipc.components": ["my_pkg::MyNode = my_pkg.my_module:MyNode"]}

The class must be an ``rclpy`` ``Node`` whose constructor takes only ``Node``'s keyword arguments
(``cli_args``, ``parameter_overrides``, ``use_global_arguments``, ``context``, ...), as rclcpp
components take ``NodeOptions``: name, namespace and remappings arrive as ``cli_args``.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

__all__ = ["COMPONENT_GROUP", "UnknownComponentError", "available_components", "component_class"]

COMPONENT_GROUP = "ros2_cuda_ipc.components"


class UnknownComponentError(LookupError):
    """No component of that name is registered; the message lists the ones that are."""

    def __str__(self) -> str:
        return str(self.args[0])


def available_components() -> list[str]:
    """Every registered ``package::Class`` name, sorted."""
    return sorted({ep.name for ep in entry_points(group=COMPONENT_GROUP)})


def component_class(name: str) -> Any:
    """The node class registered as ``name`` (``package::Class``)."""
    for ep in entry_points(group=COMPONENT_GROUP):
        if ep.name == name:
            return ep.load()
    raise UnknownComponentError(f"no component named {name!r}; available: {', '.join(available_components()) or 'none'} "
                                f"(entry-point group {COMPONENT_GROUP})")
