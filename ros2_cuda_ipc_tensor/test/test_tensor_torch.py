"""The torch_conversions names over GpuTensor, on host memory in one process (skips without torch)."""

import numpy as np
import pytest

from ros2_cuda_ipc_tensor import TensorPublisher, TensorReader

torch = pytest.importorskip("torch")
from ros2_cuda_ipc_tensor.torch import (  # noqa: E402  (only where torch is)
    allocate_tensor_msg,
    from_input_tensor_msg,
    from_output_tensor_msg,
    to_tensor_msg,
)


@pytest.fixture
def reader():
    return TensorReader()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.bool,
                                   torch.complex64, torch.uint16, torch.int64])
def test_a_tensor_round_trips_bit_exactly(node, reader, dtype):
    source = (torch.randn(3, 4, 5) * 8).to(dtype).transpose(1, 2)  # not contiguous: one strided copy in
    with TensorPublisher(node, "torch_round_trip", shape=(3, 5, 4), dtype=dtype, memory="host") as pub:
        msg = to_tensor_msg(source, publisher=pub)
        seen = from_input_tensor_msg(msg, reader=reader)
    assert seen.dtype == dtype and seen.shape == source.shape
    assert seen.contiguous().view(torch.uint8).numpy().tobytes() == source.contiguous().view(torch.uint8).numpy().tobytes()


def test_clone_false_shares_the_block_and_clone_true_does_not(node, reader):
    with TensorPublisher(node, "torch_clone", shape=(2, 8), dtype=torch.bfloat16, memory="host", reuse_delay=0) as pub:
        frame = allocate_tensor_msg((1, 8), torch.bfloat16, "cpu", publisher=pub)
        out = from_output_tensor_msg(frame)
        assert out.shape == (1, 8) and out.data_ptr() == frame.device_ptr
        out.copy_(torch.arange(8, dtype=torch.bfloat16).reshape(1, 8))
        msg = frame.publish()
        with reader.read(msg) as view:
            mapping = view.handle.device_ptr  # where this reader maps the block
        shared = from_input_tensor_msg(msg, clone=False, reader=reader)
        assert shared.data_ptr() == mapping
        assert reader.stats()["leases_held"] == 1  # the tensor holds the lease while it lives
        copied = from_input_tensor_msg(msg, clone=True, reader=reader)
        assert copied.data_ptr() != shared.data_ptr() and torch.equal(copied, shared)
        assert reader.stats()["leases_held"] == 1  # the clone gave its lease back
        del shared
        assert reader.stats()["leases_held"] == 0
        assert torch.equal(copied, torch.arange(8, dtype=torch.bfloat16).reshape(1, 8))


def test_what_does_not_fit_the_publisher_is_refused_before_a_block(node):
    with TensorPublisher(node, "torch_refusals", shape=(2, 8), dtype=torch.float16, memory="host") as pub:
        with pytest.raises(ValueError, match="does not match"):
            allocate_tensor_msg((2, 8), torch.bfloat16, publisher=pub)
        with pytest.raises(ValueError, match="only the leading dimension"):
            allocate_tensor_msg((2, 9), torch.float16, publisher=pub)
        with pytest.raises(ValueError, match=r"cuda.*host memory"):
            allocate_tensor_msg((2, 8), torch.float16, "cuda", publisher=pub)
        with pytest.raises(ValueError, match="this publisher sends float16"):
            to_tensor_msg(torch.zeros(2, 8), publisher=pub)
        assert pub.pool.stats()["published"] == 0


def test_a_bfloat16_view_is_refused_by_numpy_but_not_by_torch(node, reader):
    with TensorPublisher(node, "torch_numpy", shape=(4,), dtype=torch.bfloat16, memory="host") as pub:
        msg = to_tensor_msg(torch.tensor([1.5, -2.0, 3.25, 0.0], dtype=torch.bfloat16), publisher=pub)
        with reader.read(msg) as view:
            with pytest.raises(TypeError, match="numpy has no bfloat16"):
                np.asarray(view)
            assert torch.from_dlpack(view).tolist() == [1.5, -2.0, 3.25, 0.0]
