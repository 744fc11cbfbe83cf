"""``Hearing``: which ``/diagnostics`` publishers ``top`` has heard from, so that ``--once`` waits for each.

Every reporter publishes once a second, but a snapshot taken a fixed time after start misses any
reporter discovered late or whose first report had not come yet (``--once`` listed 2 of 3 readers of
a topic that the live view, a few redraws later, showed). So ``--once`` listens its ``--wait`` and then on,
a bounded while, until every ``/diagnostics`` publisher the graph knows has been heard at least once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ros2_cuda_ipc_core import DIAGNOSTICS_TOPIC

__all__ = ["Hearing"]


class Hearing:
    """A subscription callback that passes every ``DiagnosticArray`` on and notes its publisher's gid."""

    def __init__(self, take: Callable[[Any], None]) -> None:
        self._take = take
        self._heard: set[bytes] = set()
        self._unnamed = False  # a message info without the publisher's gid (Jazzy's rclpy): nobody can be told apart

    def __call__(self, msg: Any, info: Any) -> None:
        self._take(msg)
        gid = info.get("publisher_gid") if isinstance(info, dict) else None
        if gid is None:
            self._unnamed = True
        else:
            self._heard.add(bytes(gid["data"]))

    def heard_every_publisher(self, node: Any) -> bool:
        """Whether every publisher of ``/diagnostics`` in ``node``'s graph has been heard at least once (never, where
        this rclpy does not say who sent a message: ``--once`` then listens its whole bound, as on Humble)."""
        return not self._unnamed and all(bytes(info.endpoint_gid) in self._heard
                   for info in node.get_publishers_info_by_topic(DIAGNOSTICS_TOPIC))

    @staticmethod
    def supported() -> bool:
        """Whether this rclpy hands a subscription callback the message's info (Iron and later; not Humble)."""
        from rclpy.subscription import Subscription

        return hasattr(Subscription, "CallbackType")
