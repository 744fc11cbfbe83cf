"""Buffers for ``uint8[]`` message fields (``sensor_msgs/Image.data``, ``PointCloud2.data``) that stay fast on every distro.

A generated setter keeps an ``array.array('B')`` as it is.  Given anything else (``bytes``, a numpy
array, a list), Humble's setters, and Jazzy's and newer with ``ROS_PYTHON_CHECK_FIELDS=1``, check the
value element by element: about half a second for a 1080p rgb8 frame.  So a bridge downloads into
one of these and assigns it.
"""

from __future__ import annotations

import array

__all__ = ["message_bytes"]


def message_bytes(size: int) -> array.array[int]:
    """A zeroed ``array.array('B')`` of ``size`` bytes: write into it (``buffer_info()[0]`` is its address,
    ``numpy.frombuffer`` a writable view), then assign it to the message field."""
    if size < 0:
        raise ValueError(f"a message buffer of {size} bytes")
    return array.array("B", b"\0") * size
