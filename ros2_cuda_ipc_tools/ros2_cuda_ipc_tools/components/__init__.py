"""Components: nodes loaded by ``package::Class`` name, several in one process or one per process.

The names load on first use (PEP 562): ``python -m ros2_cuda_ipc_tools.components.run_component`` (how the
pipeline runner starts every node) and ``...container`` then run a module this package has not imported
already, which runpy would warn about on every start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import ros2_cuda_ipc_core  # noqa: F401  (first: in an executable, a stop from here on is a clean exit 0: core.startup)

if TYPE_CHECKING:
    from .container import ComponentContainer, ComponentLoadError, ComponentSpec, read_pipeline_file
    from .parent_watch import PARENT_PID_VARIABLE, STACKS_SIGNAL, follow_runner
    from .registry import COMPONENT_GROUP, UnknownComponentError, available_components, component_class
    from .run_component import CONFIGURATION_ERRORS, run_component

_HOMES = {
    "COMPONENT_GROUP": "registry", "UnknownComponentError": "registry", "available_components": "registry",
    "component_class": "registry", "CONFIGURATION_ERRORS": "run_component", "run_component": "run_component",
    "PARENT_PID_VARIABLE": "parent_watch", "STACKS_SIGNAL": "parent_watch", "follow_runner": "parent_watch",
    "ComponentContainer": "container", "ComponentLoadError": "container", "ComponentSpec": "container",
    "read_pipeline_file": "container",
}

__all__ = [
    "COMPONENT_GROUP",
    "CONFIGURATION_ERRORS",
    "PARENT_PID_VARIABLE",
    "STACKS_SIGNAL",
    "ComponentContainer",
    "ComponentLoadError",
    "ComponentSpec",
    "UnknownComponentError",
    "available_components",
    "component_class",
    "follow_runner",
    "read_pipeline_file",
    "run_component",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value  # the function run_component, not the submodule the import bound to that name
    return value
