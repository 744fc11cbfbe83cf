"""Components: nodes loaded by ``package::Class`` name, several in one process or one per process."""

from .container import ComponentContainer, ComponentLoadError, ComponentSpec, read_pipeline_file
from .parent_watch import PARENT_PID_VARIABLE, STACKS_SIGNAL, follow_runner
from .registry import COMPONENT_GROUP, UnknownComponentError, available_components, component_class
from .run_component import CONFIGURATION_ERRORS, run_component

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
