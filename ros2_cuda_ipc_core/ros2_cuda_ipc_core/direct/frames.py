"""What a direct record stands for: a typed message made of its pool's latest template and the record's fields.

Building a real ROS message per frame costs what the direct path saves (a ``Header`` alone takes tens of
microseconds to construct right after an idle gap), so a frame is a :class:`DirectMessage`: the template's
fields, this publication's ``core`` (a checked :class:`..descriptor.Descriptor`) and a light
:class:`FrameHeader` that a view turns into a ``std_msgs/Header`` only when someone asks for it.
"""

from __future__ import annotations

from typing import Any


class FrameStamp:
    """The header stamp of a direct frame (``sec``, ``nanosec``), as ``builtin_interfaces/Time`` has them."""

    __slots__ = ("nanosec", "sec")

    def __init__(self, sec: int, nanosec: int) -> None:
        self.sec = sec
        self.nanosec = nanosec


class FrameHeader:
    """The header of a direct frame: its stamp and the template's ``frame_id``; :meth:`message` makes the real one."""

    __slots__ = ("frame_id", "stamp")

    def __init__(self, stamp: FrameStamp, frame_id: str) -> None:
        self.stamp = stamp
        self.frame_id = frame_id

    def message(self) -> Any:
        """This header as a ``std_msgs/Header``."""
        from builtin_interfaces.msg import Time
        from std_msgs.msg import Header

        return Header(stamp=Time(sec=self.stamp.sec, nanosec=self.stamp.nanosec), frame_id=self.frame_id)


def real_header(header: Any) -> Any:
    """``header`` as a ``std_msgs/Header``: itself, unless it is a direct frame's."""
    return header.message() if type(header) is FrameHeader else header


class DirectMessage:
    """A typed message delivered directly: ``header`` and ``core`` of this publication, every other field the
    template's (the layout's fields, unchanged since the template was sent)."""

    __slots__ = ("_template", "core", "header")

    def __init__(self, header: FrameHeader, core: Any, template: Any) -> None:
        self.header = header
        self.core = core
        self._template = template

    def __getattr__(self, name: str) -> Any:
        return getattr(self._template, name)
