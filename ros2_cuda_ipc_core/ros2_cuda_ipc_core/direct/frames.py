"""What a direct record stands for: a typed message made of its pool's latest template and the record's fields.

Building a real ROS message per frame costs what the direct path saves (a ``std_msgs/Header`` alone takes tens
of microseconds to construct right after an idle gap), so a frame is a :class:`DirectMessage`: the
template's fields, this publication's ``core`` (a checked :class:`..pool.descriptor.Descriptor`) and a real header
that :class:`HeaderSpares` made ahead, while the thread was idle, and fills now.
"""

from __future__ import annotations

from typing import Any


class TemplateMessage:
    """A typed message made of a template's fields and one publication's ``header`` and ``core``: what a reader
    gets where the layout's fields repeat from frame to frame (a direct record; a DDS copy whose bytes repeat a
    template's)."""

    __slots__ = ("_template", "core", "header")

    def __init__(self, header: Any, core: Any, template: Any) -> None:
        self.header = header
        self.core = core
        self._template = template

    def __getattr__(self, name: str) -> Any:
        return getattr(self._template, name)


class DirectMessage(TemplateMessage):
    """A typed message delivered directly: every field but ``header`` and ``core`` the template's, unchanged since
    the pool sent it on the channel."""

    __slots__ = ()


class HeaderSpares:
    """``std_msgs/Header`` objects made one ahead (:meth:`refill`, after a frame) and filled per frame (:meth:`take`).

    :meth:`take` writes the fields' slots directly: the record's struct already bounds them (``sec`` a signed and
    ``nanosec`` an unsigned 32-bit integer, ``frame_id`` a decoded string), which is all the setters would check.
    """

    def __init__(self) -> None:
        from std_msgs.msg import Header

        self._make = Header
        self._spare: Any = Header()

    def take(self, sec: int, nanosec: int, frame_id: str) -> Any:
        header, self._spare = self._spare, None
        if header is None:
            header = self._make()
        stamp = header.stamp
        stamp._sec, stamp._nanosec = sec, nanosec
        header._frame_id = frame_id
        return header

    def refill(self) -> None:
        if self._spare is None:
            self._spare = self._make()
