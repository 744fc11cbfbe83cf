"""``TensorSubscription``: every tensor of a ``GpuTensor`` topic as a ``TensorView``, read zero-copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ros2_cuda_ipc_core import DeliveryMode, StreamLike, TypedSubscription
from ros2_cuda_ipc_msgs.msg import GpuTensor

from .reader import TensorReader
from .view import TensorView


class TensorSubscription(TypedSubscription[TensorView]):
    """``callback(view)`` once per tensor on ``topic``, in order, each once.

    A tensor publisher has no CPU twin: one whose pool this process cannot map (another host, namespace or
    user; no CUDA here) is refused, said once as an error.  ``delivery="direct"`` runs the callback on the
    subscription's own thread as soon as a tensor arrives on the pool's connection, outside the executor (it
    must then be thread-safe; see ``TypedSubscription``).  Give a ``reader`` to share pool imports with other
    typed readers of this process.
    """

    def __init__(self, node: Any, topic: str, callback: Callable[[TensorView], None], qos: Any = 10, *,
                 stream: StreamLike = None, reader: TensorReader | None = None,
                 delivery: DeliveryMode = "executor") -> None:
        super().__init__(node, topic, GpuTensor, reader or TensorReader(), None, callback, qos, fallback="never",
                         stream=stream, delivery=delivery)
