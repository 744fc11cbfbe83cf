"""Test support (not shipped): ROS message setters that check every value, that check none, and what they were given.

Humble's generated setters check every assigned value (byte by byte for a ``uint8[]`` that is not an
``array.array('B')``); Jazzy's and newer do when constructed with ``check_fields=True`` (or under
ROS_PYTHON_CHECK_FIELDS=1) and take anything with ``check_fields=False``.  Humble has no such switch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def checking(message_type: type) -> Any:
    """A message whose setters check every value (Humble's always do)."""
    try:
        return message_type(check_fields=True)
    except AssertionError:  # Humble: 'Invalid arguments passed to constructor: check_fields'
        return message_type()


def unchecked(message_type: type) -> Any:
    """A message whose setters take any value, as a malformed message from a peer could carry (not on Humble)."""
    try:
        return message_type(check_fields=False)
    except AssertionError:  # Humble
        return message_type()


def values_given_to_setter(field: str, call: Callable[[], Any]) -> tuple[Any, list[Any]]:
    """Run ``call()``; return its result and the values it passed to any generated ``field`` setter."""
    given: list[Any] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == field and "value" in frame.f_locals:
            given.append(frame.f_locals["value"])

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, given
