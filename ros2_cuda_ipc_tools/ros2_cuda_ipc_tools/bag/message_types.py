"""Message types by name, for both sides of a bag: the rclpy class (to subscribe or publish) and the
rosbags type store entry (to serialize, and the definition and hash a bag's connection records).

``ros2 bag record`` stores each topic's definition so a bag stays readable without the packages that
made it; rosbags ships the standard ones, and a type it lacks (``ros2_cuda_ipc_msgs``, a driver's own) is
parsed from the ``.msg`` files its package installed, its field types recursively.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from .bag_errors import BagError

__all__ = ["MessageTypes"]

_STORES = {"jazzy": Stores.ROS2_JAZZY, "kilted": Stores.ROS2_KILTED, "humble": Stores.ROS2_HUMBLE}
#: Field types of a definition that are themselves messages (``pkg/Name`` or a same-package ``Name``).
_PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
               "int64", "uint64", "string", "wstring"}


def rclpy_class(msgtype: str) -> type:
    """The rclpy message class of ``pkg/msg/Name``; BagError naming it when its package is not importable."""
    package, kind, name = _split(msgtype)
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError):
        raise BagError(f"message type {msgtype} is not installed here (no Python module {package}.{kind}.{name})") \
            from None


def _split(msgtype: str) -> tuple[str, str, str]:
    parts = msgtype.split("/")
    if len(parts) != 3 or not all(p.isidentifier() for p in parts):
        raise BagError(f"{msgtype!r} is not a message type name of the form package/msg/Name")
    return parts[0], parts[1], parts[2]


class MessageTypes:
    """One rosbags type store for this distro, completed on demand from installed ``.msg`` files."""

    def __init__(self, distro: str | None = None) -> None:
        self.store: Typestore = get_typestore(_STORES.get(distro or os.environ.get("ROS_DISTRO", ""), Stores.LATEST))

    def known(self, msgtype: str) -> bool:
        return msgtype in self.store.types

    def ensure(self, msgtype: str) -> None:
        """Make ``msgtype`` (and the message types of its fields) known; BagError if a definition is not found."""
        pending = [msgtype]
        found: dict[str, Any] = {}
        while pending:
            name = pending.pop()
            if self.known(name) or name in found:
                continue
            text = self._definition(name)
            types = get_types_from_msg(text, name)
            found.update(types)
            pending.extend(_field_types(text, name))
        if found:
            self.store.register(found)

    @staticmethod
    def _definition(msgtype: str) -> str:
        package, kind, name = _split(msgtype)
        try:
            from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
        except ImportError:
            raise BagError(f"the definition of {msgtype} cannot be looked up: ament_index_python is missing") from None
        try:
            path = Path(get_package_share_directory(package)) / kind / f"{name}.msg"
        except PackageNotFoundError:
            raise BagError(f"the definition of {msgtype} is not installed (no package {package} on "
                           "AMENT_PREFIX_PATH)") from None
        try:
            return path.read_text()
        except OSError:
            raise BagError(f"the definition of {msgtype} is not installed ({path} cannot be read)") from None

    def serialize(self, message: Any, msgtype: str) -> memoryview:
        """CDR bytes of a rosbags message object, as a ROS 2 publisher would have sent them."""
        return self.store.serialize_cdr(message, msgtype)

    def new(self, msgtype: str, **fields: Any) -> Any:
        """A rosbags message object of ``msgtype``."""
        return self.store.types[msgtype](**fields)


def _field_types(text: str, msgtype: str) -> list[str]:
    """Message types the fields of a ``.msg`` definition name, fully qualified."""
    package = msgtype.split("/")[0]
    names = []
    for line in text.splitlines():
        words = line.split("#")[0].split()
        if len(words) < 2 or "=" in line.split("#")[0]:
            continue
        base = words[0].split("[")[0].split("<")[0]
        if base in _PRIMITIVES or base.startswith(("string", "wstring")):
            continue
        if base == "Header":
            names.append("std_msgs/msg/Header")
        elif "/" in base:
            pkg, name = base.split("/")[0], base.split("/")[-1]
            names.append(f"{pkg}/msg/{name}")
        else:
            names.append(f"{package}/msg/{base}")
    return names
