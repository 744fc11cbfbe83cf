"""``PointCloudPublisher``: a pool of cloud-sized blocks and a ``GpuPointCloud2`` publisher on one topic."""

from __future__ import annotations

from typing import Any

import numpy as np
from sensor_msgs.msg import PointCloud2

from ros2_cuda_ipc_core import (
    DEFAULT_REUSE_DELAY,
    MemoryKind,
    StreamLike,
    TwinSpec,
    TypedPublisher,
    check_count,
    check_optional_count,
    copy_strided,
    strided_source,
)
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

from .bridge import to_pointcloud2_msg
from .fields import fields_from_dtype
from .frame import CloudFrame
from .layout import CloudLayout
from .reader import PointCloudReader
from .repack import repack


class PointCloudPublisher(TypedPublisher[CloudLayout, GpuPointCloud2]):
    """Publishes point clouds of one point layout without copying them: borrow a frame, fill it, publish it.

    ``fields``: a list of ``sensor_msgs/PointField``, a numpy structured dtype (offsets and itemsize
    kept), or a named layout (``"xyz"``, ``"xyzi"``, ``"xyzrgb"``, ``"ouster"``, ``"velodyne"``,
    ``"livox"``).  ``width`` x ``height`` is the capacity; unorganized clouds (height 1) say at
    ``publish(width=n)`` how many points a message carries.  ``block_count``, ``memory``, ``device`` and
    ``reuse_delay`` (seconds before a published block is reused) configure the pool as in ``TypedPublisher``.
    Its CPU twin (``fallback``, ``fallback_rate``, ``fallback_topic`` as in ``TypedPublisher``) is a
    ``sensor_msgs/PointCloud2`` on ``<resolved topic>/cpu``, fed only while subscribed.
    """

    def __init__(self, node: Any, topic: str, *, fields: Any, width: int, height: int = 1,
                 point_step: int | None = None, row_step: int | None = None, block_count: int = 4,
                 memory: MemoryKind = "auto", device: int = 0, qos: Any = 10,
                 reuse_delay: float = DEFAULT_REUSE_DELAY, fallback: bool = True, fallback_rate: float = 0.0,
                 fallback_topic: str | None = None) -> None:
        capacity = " (width x height points is the capacity)"
        width, height = check_count("width", width, capacity), check_count("height", height, capacity)
        point_step, row_step = check_optional_count("point_step", point_step), check_optional_count("row_step", row_step)
        layout = CloudLayout.create(fields, width, height, point_step, row_step)
        super().__init__(node, topic, GpuPointCloud2, layout, block_count=block_count, memory=memory, device=device,
                         qos=qos, reuse_delay=reuse_delay, fallback=fallback, fallback_rate=fallback_rate,
                         fallback_topic=fallback_topic)

    def twin_specs(self, base_topic: str) -> list[TwinSpec]:
        return [TwinSpec(PointCloud2, base_topic, to_pointcloud2_msg)]

    def twin_reader(self) -> PointCloudReader:
        return PointCloudReader()

    def borrow(self, timeout: float = 0.0) -> CloudFrame | None:
        """A writable cloud of the full capacity, or None if every block is still in use after ``timeout`` seconds."""
        block = self.pool.acquire_for_publish(timeout)
        return None if block is None else CloudFrame(self, block, self.layout)

    def publish_array(self, array: Any, stream: StreamLike = None, header: Any = None,
                      is_dense: bool = False) -> GpuPointCloud2 | None:
        """Copy a user's cloud into a block and publish it; returns the message, or None if no block is free.

        ``array`` is a numpy structured array of points, shaped (N,) or (height, width), or any
        numpy / DLPack / CUDA-array-interface array shaped (N, k) or (height, width, k) whose k values
        are one point's ``point_step`` bytes (``(N, 4)`` float32 for ``"xyzi"``, ``(N, 48)`` uint8 for an
        Ouster point).  One copy; a structured array of another layout is repacked on the host first.
        """
        if isinstance(array, np.ndarray) and array.dtype.names is not None:
            return self._publish_structured(array, stream, header, is_dense)
        source = strided_source(array)
        shape, strides, dtype = source.layout.shape, source.layout.strides, source.layout.dtype
        if len(shape) not in (2, 3) or shape[-1] * dtype.itemsize != self.layout.point_step or strides[-1] != dtype.itemsize:
            raise ValueError(f"array is {shape} {dtype} with byte strides {strides}; give (N, k) or (height, width, k) "
                             f"with k contiguous values making one {self.layout.point_step}-byte point")
        return self._copy_points(source.address, shape[:-1], strides[:-1], source.on_device, stream, header, is_dense)

    def _publish_structured(self, points: np.ndarray, stream: StreamLike, header: Any,
                            is_dense: bool) -> GpuPointCloud2 | None:
        if points.ndim not in (1, 2):
            raise ValueError(f"structured points are shaped (N,) or (height, width), not {points.shape}")
        fields, point_step = fields_from_dtype(points.dtype)
        if fields == self.layout.fields and point_step == self.layout.point_step:
            return self._copy_points(points.ctypes.data, points.shape, points.strides, False, stream, header, is_dense)
        dense = np.ascontiguousarray(points)
        height, width = (1, len(dense)) if dense.ndim == 1 else dense.shape
        given = CloudLayout(height, width, point_step, width * point_step, fields).validate(dense.nbytes)
        target = self._message_layout(dense.shape, is_dense)
        data = repack(dense.view(np.uint8).reshape(-1), given, target)
        return self._copy_points(data.ctypes.data, (height, width), (target.row_step, target.point_step), False, stream,
                                 header, is_dense)

    def _message_layout(self, shape: tuple[int, ...], is_dense: bool) -> CloudLayout:
        height, width = (1, shape[0]) if len(shape) == 1 else shape
        try:
            return self.layout.with_points(width, height, is_dense)
        except ValueError:
            raise ValueError(f"{height} x {width} points exceed this publisher's capacity of "
                             f"{self.layout.height} x {self.layout.width}") from None

    def _copy_points(self, address: int, shape: tuple[int, ...], strides: tuple[int, ...], on_device: bool,
                     stream: StreamLike, header: Any, is_dense: bool) -> GpuPointCloud2 | None:
        """One strided copy of whole points into a fresh block at the message layout's addresses, then publish."""
        layout = self._message_layout(shape, is_dense)
        frame = self.borrow()
        if frame is None:
            return None
        with frame:
            targets = (layout.row_step, layout.point_step) if len(shape) == 2 else (layout.point_step,)
            device = self.pool.device if self.pool.memory == "cuda" or on_device else None
            copy_strided(frame.device_ptr, targets, address, strides, shape, layout.point_step, cuda_device=device,
                         stream=stream)
            return self.publish_block(frame.block, layout, stream, header)


def publish_pointcloud2_msg(publisher: PointCloudPublisher, msg: PointCloud2) -> GpuPointCloud2 | None:
    """Publish a ``sensor_msgs/PointCloud2`` through ``publisher`` with one upload; None if no block was free.

    A cloud with the publisher's fields, point_step and byte order travels verbatim (its row_step and
    padding too); any other is repacked on the host into the publisher's points first, field by field.
    """
    given = CloudLayout.from_message(msg).validate(len(msg.data))
    mine = publisher.layout
    carried = min(len(msg.data), given.data_size)
    if (given.fields, given.point_step, given.is_bigendian) == (mine.fields, mine.point_step, mine.is_bigendian) \
            and carried <= publisher.pool.block_size:
        return publisher.publish_bytes(memoryview(msg.data)[:carried], given, msg.header)
    try:
        target = mine.with_points(given.width, given.height, given.is_dense)
    except ValueError:
        raise ValueError(f"a {given.height} x {given.width} cloud exceeds this publisher's capacity of "
                         f"{mine.height} x {mine.width} points") from None
    return publisher.publish_bytes(repack(msg.data, given, target).data, target, msg.header)
