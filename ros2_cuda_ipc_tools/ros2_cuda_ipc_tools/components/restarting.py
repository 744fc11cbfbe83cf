"""An executor that tells its owner which node's callback raised, instead of ending the spin.

rclpy's executors re-raise a callback's exception out of ``spin``: in a container that ends every
component for one component's bug. :class:`RestartingExecutor` runs callbacks as
``SingleThreadedExecutor`` does, through the API rclpy documents for custom executors
(``wait_for_ready_callbacks``), and hands an exception with the node it came from to ``on_error``;
when that returns True (the container restarts the component) the spin goes on.
"""

from __future__ import annotations

from collections.abc import Callable

from rclpy.executors import ShutdownException, SingleThreadedExecutor, TimeoutException
from rclpy.node import Node

try:
    from rclpy.executors import ConditionReachedException
except ImportError:  # older rclpy: no wait condition, so nothing raises it
    class ConditionReachedException(Exception):  # type: ignore[no-redef]
        """Stands in for rclpy's, which this rclpy does not have."""

__all__ = ["RestartingExecutor"]

#: Given the node whose callback raised and the exception: True if it was dealt with (the spin goes on).
ErrorHandler = Callable[[Node, Exception], bool]


class RestartingExecutor(SingleThreadedExecutor):
    """``SingleThreadedExecutor``, but a callback that raises goes to :attr:`on_error` with its node first."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.on_error: ErrorHandler | None = None

    def spin_once(self, timeout_sec: float | None = None) -> None:
        try:
            handler, _, node = self.wait_for_ready_callbacks(timeout_sec=timeout_sec)
        except (ShutdownException, TimeoutException, ConditionReachedException):
            return
        handler()
        error = handler.exception()
        if error is None:
            return
        if isinstance(error, Exception) and node is not None and self.on_error is not None \
                and self.on_error(node, error):
            return
        raise error
