"""Message types by name, for both sides of a bag: the rclpy class (to subscribe or publish) and the
rosbags type store entry (to serialize, and the definition and hash a bag's connection records).

``ros2 bag record`` stores each topic's definition so a bag stays readable without the packages that
made it; rosbags ships the standard ones, and a type it lacks (``ros2_cuda_ipc_msgs``, a driver's own) is
parsed from the ``.msg`` files its package installed, its field types recursively.
"""

from __future__ import annotations

import importlib
import os
import re
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


#: A message type name as rosidl makes them: ``package/msg/Name``.
_MESSAGE_TYPE = re.compile(r"[a-z][a-z0-9_]*/msg/[A-Z][A-Za-z0-9]*")


def rclpy_class(msgtype: str) -> type:
    """The rclpy message class of ``pkg/msg/Name``, found only through the ROS type system.

    A name comes from a file or a peer, so it is hostile: it must have rosidl's form, and its package must
    register exactly that interface in the ament index (``rosidl_interfaces``), as every installed
    interface package does, before its generated ``pkg.msg`` module is imported.  No other module is ever
    imported because of a name.  BagError (one line) otherwise.
    """
    package, kind, name = _split(msgtype)
    try:
        from ament_index_python import get_resource
        from ament_index_python.packages import PackageNotFoundError
    except ImportError:
        raise BagError(f"{msgtype} cannot be looked up: ament_index_python is missing") from None
    try:
        listed, _ = get_resource("rosidl_interfaces", package)
    except (LookupError, PackageNotFoundError, ValueError):
        raise BagError(f"{msgtype} is not an installed ROS interface (no package {package} in the ament index)") \
            from None
    if not {f"{kind}/{name}.idl", f"{kind}/{name}.msg"} & set(listed.split()):
        raise BagError(f"{msgtype} is not an installed ROS interface ({package} has no {kind}/{name})")
    try:
        found = getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError):
        raise BagError(f"{msgtype} is indexed but its Python module {package}.{kind} is not importable") from None
    if not isinstance(found, type) or not hasattr(type(found), "_TYPE_SUPPORT"):
        raise BagError(f"{package}.{kind}.{name} is not a generated message class")
    return found


def _split(msgtype: str) -> tuple[str, str, str]:
    if not isinstance(msgtype, str) or not _MESSAGE_TYPE.fullmatch(msgtype):
        raise BagError(f"{str(msgtype)[:120]!r} is not a message type name of the form package/msg/Name")
    package, kind, name = msgtype.split("/")
    return package, kind, name


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
