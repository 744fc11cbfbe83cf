"""The tools a user runs against their own ros2_cuda_ipc topics, one subpackage each.

``components``: the Python component container, ``run_component`` (one component as its own process),
the ``ros2_cuda_ipc.components`` registry and the runner's parent watch.  The recorder, player, viewer
and ``top`` live beside it.  Only the component names are imported here, so a tool's heavier imports
(a GL context, a bag library) load only when that tool runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import components
from .components import __all__ as __all__

if TYPE_CHECKING:
    from .components import *  # noqa: F403  (the components' names are this package's: one list, in components)


def __getattr__(name: str) -> Any:
    return getattr(components, name)  # loaded on first use: see components
