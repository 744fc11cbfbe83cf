"""The bridge to ``sensor_msgs/PointCloud2``: one download out, same bytes and layout (the upload in:
``publish_pointcloud2_msg``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sensor_msgs.msg import PointCloud2

from ros2_cuda_ipc_core import InvalidDescriptorError, check_frame_bytes, copy_rows, message_bytes

from .layout import CloudLayout

if TYPE_CHECKING:
    from .view import PointCloudView


def to_pointcloud2_msg(view: PointCloudView) -> PointCloud2:
    """A ``sensor_msgs/PointCloud2`` of ``view``: one download of its bytes, layout and padding kept.

    The download lands in the ``array.array('B')`` (:func:`message_bytes`) that becomes ``msg.data``: every distro's setter takes
    that type as it is (Humble's, and Jazzy's with ROS_PYTHON_CHECK_FIELDS=1, check anything else byte by
    byte: 1.1 s for a 6 MiB Ouster cloud, against 12 ms, on Kilted with check_fields=True here).
    """
    layout = view.layout
    if layout.point_count == 0 and layout.data_size > view.handle.byte_size:
        raise InvalidDescriptorError(f"an empty cloud claims {layout.data_size} bytes of rows; its block carries "
                                     f"{view.handle.byte_size}")
    data = message_bytes(layout.data_size)  # a block that carries less than whole rows leaves zeros
    carried = min(layout.data_size, view.handle.byte_size)
    if carried:
        cuda = view.handle.device_id if view.memory == "cuda" else None
        copy_rows(data.buffer_info()[0], carried, view.handle.device_ptr, carried, carried, 1, cuda, view.stream)
    msg = PointCloud2()
    msg.header = view.header
    layout.fill_message(msg)
    msg.data = data
    return msg


def check_pointcloud2_msg(msg: PointCloud2, max_bytes: int) -> CloudLayout:
    """The checked layout of a PointCloud2 whose claims fit the bytes it carries (``height * row_step``, as the
    message definition says) and ``max_bytes``; InvalidDescriptorError naming what is wrong, before any pool."""
    layout = CloudLayout.from_message(msg).validate(len(msg.data))
    check_frame_bytes(layout.data_size, max_bytes, f"a PointCloud2 of {layout.height} rows of {layout.row_step} bytes")
    if layout.data_size > len(msg.data):
        raise InvalidDescriptorError(f"a PointCloud2 of {layout.height} rows of {layout.row_step} bytes carries "
                                     f"{len(msg.data)} bytes, not {layout.data_size}")
    return layout
