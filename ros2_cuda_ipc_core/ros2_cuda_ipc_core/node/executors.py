"""Executors by name, for the tools' ``--executor`` options, made so that a Ctrl-C during start-up is harmless.

``single`` and ``multi`` are rclpy's ``SingleThreadedExecutor`` and ``MultiThreadedExecutor``; ``events`` is
rclpy's C++ ``EventsExecutor`` (``rclpy.experimental``, where the installed rclpy has it), measured fastest of the three on the
typed path (docs/performance.md).  It takes no guard conditions and no callbacks with a ``MessageInfo``;
ros2_cuda_ipc's subscriptions, publishers, twins and diagnostics use neither, so every example node runs on it.
A node process whose code names no executor takes the one :data:`EXECUTOR_ENVIRONMENT` names: how a pipeline runner
hands its ``--executor`` to node processes that take only ROS arguments.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rclpy.executors import Executor

__all__ = ["EXECUTORS", "EXECUTOR_ENVIRONMENT", "executor_factory", "executor_from_environment", "new_executor"]

#: The names :func:`executor_factory` takes.
EXECUTORS = ("single", "multi", "events")
#: The environment variable naming the executor of a node process whose code chose none (unset: ``single``).
EXECUTOR_ENVIRONMENT = "ROS2_CUDA_IPC_EXECUTOR"
_E = TypeVar("_E", bound="Executor")


def new_executor(kind: type[_E], **kwargs: Any) -> _E:
    """``kind(**kwargs)``, safe against a Ctrl-C that lands inside its ``__init__``.

    rclpy's ``Executor.__del__`` reads ``_sigint_gc``, which ``__init__`` sets near its end: a KeyboardInterrupt
    raised before that (a stop signal right after start-up) leaves a half-made executor whose collection prints
    ``AttributeError: ... no attribute '_sigint_gc'`` on stderr.  Set first, the attribute is there whenever
    ``__del__`` runs; ``__init__`` assigns it for real.
    """
    executor = kind.__new__(kind)
    object.__setattr__(executor, "_sigint_gc", None)  # not an attribute of every rclpy version's typing
    executor.__init__(**kwargs)  # type: ignore[misc]
    return executor


def executor_factory(name: str) -> Callable[[], Executor]:
    """What makes the executor ``name`` (one of :data:`EXECUTORS`), to call after ``rclpy.init``; ValueError saying
    why for an unknown name or an ``events`` this rclpy does not have."""
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    if name == "single":
        return lambda: new_executor(SingleThreadedExecutor)
    if name == "multi":
        return lambda: new_executor(MultiThreadedExecutor)
    if name == "events":
        try:  # by name: rclpy's typing of rclpy.experimental differs between distros, and Humble has none
            events: Callable[[], Executor] | None = vars(importlib.import_module("rclpy.experimental")).get(
                "EventsExecutor")
        except ImportError:
            events = None
        if events is None:
            raise ValueError("executor 'events': this rclpy has no rclpy.experimental.EventsExecutor; use 'single' or "
                             "'multi'")
        return events
    raise ValueError(f"executor {name!r}: one of {', '.join(EXECUTORS)}")


def executor_from_environment() -> Callable[[], Executor] | None:
    """What makes the executor :data:`EXECUTOR_ENVIRONMENT` names, or None where it is unset or empty; a ValueError
    naming the variable for a name that is not one of :data:`EXECUTORS` (or an ``events`` this rclpy lacks)."""
    name = os.environ.get(EXECUTOR_ENVIRONMENT, "").strip()
    if not name:
        return None
    if name not in EXECUTORS:  # the value shown cut short: an environment is outside input too
        raise ValueError(f"{EXECUTOR_ENVIRONMENT}={name[:40]!r}: one of {', '.join(EXECUTORS)}")
    try:
        return executor_factory(name)
    except ValueError as exc:
        raise ValueError(f"{EXECUTOR_ENVIRONMENT}={name}: {exc}") from None
