"""message_bytes: a zeroed uint8[] field buffer that every distro's setter keeps as it is, writable in place."""

import numpy as np
import pytest
from sensor_msgs.msg import Image
from setters import checking

from ros2_cuda_ipc_core import copy_rows, message_bytes


def test_zeroed_writable_in_place_and_kept_by_a_checking_setter():
    data = message_bytes(12)
    assert data.typecode == "B" and list(data) == [0] * 12
    source = np.arange(1, 7, dtype=np.uint8)
    copy_rows(data.buffer_info()[0], 6, source.ctypes.data, 6, 6, 1)
    np.frombuffer(data, np.uint8)[6:] = 7
    assert list(data) == [1, 2, 3, 4, 5, 6] + [7] * 6
    msg = checking(Image)
    msg.data = data
    assert msg.data is data


def test_sizes():
    assert len(message_bytes(0)) == 0
    with pytest.raises(ValueError, match="-1 bytes"):
        message_bytes(-1)
