"""What no array can be is refused with an InvalidDescriptorError when any view is made (host and CUDA alike go
through ``check_layout``), not with numpy's ValueError naming nothing: empty arrays included."""

import numpy as np
import pytest

from ros2_cuda_ipc_core import InvalidDescriptorError, beyond_array_limits
from ros2_cuda_ipc_core.memory.views import host_array

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("shape,strides,needle", [
    ((0, INT64_MAX), None, r"is 9223372036854775807 elements of 8 bytes \(zero extents aside\): beyond int64"),
    ((0, 2**40, 2**40), None, "elements of 8 bytes"),
    ((0, 3), (2**63, 8), r"strides\[0\] is 9223372036854775808 bytes: beyond int64"),
    ((0, 2**40), (8, 2**30), r"reaches byte \d+: beyond int64"),
    ((0,) * 65, None, "shape has 65 dimensions; an array has at most 64"),
    ((2**63, 0), None, r"shape\[0\] is 9223372036854775808: beyond int64"),
])
def test_what_no_array_can_be_is_refused_naming_why(shape, strides, needle):
    with pytest.raises(InvalidDescriptorError, match=needle):
        host_array(np.zeros(64, np.uint8), 0, 64, shape, np.float64, strides)


def test_what_an_array_can_be_passes():
    assert beyond_array_limits((0, 2**40), (8, 8), 8) is None  # numpy makes that (empty) array
    assert host_array(np.zeros(64, np.uint8), 0, 64, (0, 2**40), np.float64, (8, 8)).shape == (0, 2**40)
    assert beyond_array_limits((2, 4), (32, 8), 8, offset=INT64_MAX - 64) is None
    assert beyond_array_limits((2, 4), (32, 8), 8, offset=INT64_MAX - 63) is not None
