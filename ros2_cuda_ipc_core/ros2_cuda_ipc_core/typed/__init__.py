"""The typed layer shared by the image and point-cloud packages (DESIGN §8): layouts over one block,
a publisher / frame / reader / view with their lease rules, the array protocols of arrays in a block,
and the two bridge nodes to and from ``sensor_msgs``.

A typed package adds meaning only (encodings, point fields).  Import these names from
``ros2_cuda_ipc_core``, which re-exports them.
"""

from .arrays import ArrayProtocols, ArrayView
from .bridge_nodes import DEFAULT_MAX_FRAME_BYTES, DownloadBridge, UploadBridge, check_frame_bytes
from .checks import (
    check_count,
    check_index,
    check_integers,
    check_message_type,
    check_optional_count,
    require_cuda_for,
)
from .frame import BlockPublisher, TypedFrame
from .layout import BlockLayout, StridedLayout, TypedMessage
from .publisher import TypedPublisher
from .reader import TypedReader
from .source import StridedSource, strided_source
from .subscription import DeliveryMode, FallbackMode, Route, TypedSubscription
from .twins import CpuTwins, TwinSpec, twin_topic
from .upload import TwinUpload
from .view import TypedView

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "ArrayProtocols",
    "ArrayView",
    "BlockLayout",
    "BlockPublisher",
    "CpuTwins",
    "DeliveryMode",
    "DownloadBridge",
    "FallbackMode",
    "Route",
    "StridedLayout",
    "StridedSource",
    "TwinSpec",
    "TwinUpload",
    "TypedFrame",
    "TypedMessage",
    "TypedPublisher",
    "TypedReader",
    "TypedSubscription",
    "TypedView",
    "UploadBridge",
    "check_count",
    "check_frame_bytes",
    "check_index",
    "check_integers",
    "check_message_type",
    "check_optional_count",
    "require_cuda_for",
    "strided_source",
    "twin_topic",
]
