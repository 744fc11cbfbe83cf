"""Topic names from a command line or a bag, checked the way rcl checks them: one line with rcl's reason."""

from __future__ import annotations

from collections.abc import Callable

from .bag_errors import BagError

__all__ = ["full_topic_name"]


def full_topic_name(name: str, resolve: Callable[[str], str] | None = None) -> str:
    """``name`` resolved (by ``resolve``, a node's ``resolve_topic_name`` with its remappings; else expanded in the
    root namespace as a node ``bag_record`` would) and validated; BagError naming what rcl found wrong."""
    from rclpy.exceptions import InvalidTopicNameException
    from rclpy.expand_topic_name import expand_topic_name
    from rclpy.validate_full_topic_name import validate_full_topic_name

    try:
        full = resolve(name) if resolve is not None else expand_topic_name(name, "bag_record", "/")
        validate_full_topic_name(full)
    except (InvalidTopicNameException, ValueError, RuntimeError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0].split(", at /")[0]  # rcl's source line left out
        raise BagError(f"{name[:120]!r} is not a valid topic name ({reason[:200]})") from None
    return str(full)
