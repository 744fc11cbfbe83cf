"""CUDA images: torch sees exactly the view's shape, strides and memory.  Skips without a GPU."""

import numpy as np
import pytest
from gpu_marks import needs_gpu

from ros2_cuda_ipc_image import ImagePublisher, ImageReader

pytestmark = needs_gpu


def test_torch_from_dlpack_has_shape_strides_and_pointer(node):
    import torch

    with ImagePublisher(node, "cuda_image_test", width=640, height=480, encoding="rgba16", row_alignment=512,
                        memory="cuda") as pub:
        frame = pub.borrow()
        written = torch.from_dlpack(frame)
        assert written.shape == (480, 640, 4) and written.dtype == torch.uint16
        written.copy_(torch.arange(480 * 640 * 4, device="cuda", dtype=torch.int32).reshape(480, 640, 4).to(torch.uint16))
        msg = frame.publish(torch.cuda.current_stream())
        stream = torch.cuda.Stream()
        with ImageReader().read(msg, stream) as view, torch.cuda.stream(stream):
            seen = torch.from_dlpack(view)
            assert tuple(seen.shape) == (480, 640, 4)
            assert tuple(s * 2 for s in seen.stride()) == view.strides == (5120, 8, 2)
            assert seen.data_ptr() == view.handle.device_ptr
            expected = torch.arange(480 * 640 * 4, device="cuda", dtype=torch.int32).reshape(480, 640, 4).to(torch.uint16)
            assert bool((seen == expected).all().item())
            del seen


def test_cupy_and_numpy_access(node):
    import cupy

    with ImagePublisher(node, "cuda_image_cupy", width=16, height=8, encoding="32FC1", memory="cuda") as pub:
        frame = pub.borrow()
        cupy.from_dlpack(frame)[...] = 1.5
        msg = frame.publish()
        with ImageReader().read(msg) as view:
            assert float(cupy.from_dlpack(view).sum().get()) == 1.5 * 16 * 8
            with pytest.raises(TypeError, match="no host array"):
                np.asarray(view)
