"""CUDA tensors (skip without a GPU): torch bfloat16 and float8 across processes are the mapping itself, bit for bit;
``from_input_tensor_msg(clone=False)`` shares the block's memory and ``clone=True`` does not."""

from pathlib import Path

import pytest
from gpu_marks import needs_gpu
from peers import run_publisher_and_subscriber

from ros2_cuda_ipc_tensor import TensorPublisher, TensorReader

pytestmark = needs_gpu
PEER = str(Path(__file__).with_name("tensor_cuda_peer.py"))


def test_bfloat16_and_float8_cross_processes_zero_copy():
    published, seen = run_publisher_and_subscriber(PEER, "60")
    assert published["published"] == 60
    assert seen["errors"] == [] and seen["verified"] == 60


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float8_e4m3fn", "float32"])
def test_clone_false_shares_memory_and_clone_true_does_not(node, dtype_name):
    torch = pytest.importorskip("torch")
    from ros2_cuda_ipc_tensor.torch import from_input_tensor_msg, to_tensor_msg

    dtype = getattr(torch, dtype_name)
    source = (torch.randn(2, 3, 32, 32, device="cuda") * 4).to(dtype).transpose(2, 3)  # strided: one copy in
    reader = TensorReader()
    with TensorPublisher(node, f"cuda_tensor_{dtype_name}", shape=(2, 3, 32, 32), dtype=dtype, memory="cuda") as pub:
        msg = to_tensor_msg(source, publisher=pub)
        with reader.read(msg) as view:
            mapping = view.handle.device_ptr
            assert view.memory == "cuda"
            assert hasattr(view, "__cuda_array_interface__") == (dtype_name == "float32")  # CAI has no bf16 / fp8
        shared = from_input_tensor_msg(msg, clone=False, reader=reader)
        copied = from_input_tensor_msg(msg, clone=True, reader=reader)
        assert shared.data_ptr() == mapping and copied.data_ptr() != mapping
        assert shared.is_cuda and shared.dtype == dtype and copied.dtype == dtype
        expected = source.contiguous().view(torch.uint8)  # bit for bit
        for tensor in (shared, copied):
            assert torch.equal(tensor.contiguous().view(torch.uint8), expected)
        del shared
        torch.cuda.synchronize()


def test_clone_on_a_given_stream_is_queued_there_not_on_torchs_current_stream(node):
    """The lease goes back once the read's stream is done: a clone queued on another stream would still be
    copying a block the publisher may already be rewriting."""
    torch = pytest.importorskip("torch")
    from ros2_cuda_ipc_tensor.torch import from_input_tensor_msg, to_tensor_msg

    source = torch.randn(4, 1024, 1024, device="cuda") + 10  # never zeros: memory the copy did not write differs
    reader = TensorReader()
    with TensorPublisher(node, "cuda_tensor_clone_stream", shape=source.shape, dtype=torch.float32,
                         memory="cuda") as pub:
        msg = to_tensor_msg(source, publisher=pub)
        with reader.read(msg):  # the pool imported and its event opened before the timed part
            pass
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        torch.cuda._sleep(2_000_000_000)  # torch's current stream busy for about a second
        copied = from_input_tensor_msg(msg, clone=True, stream=side, reader=reader)
        side.synchronize()
        assert not torch.cuda.current_stream().query(), "the current stream should still be asleep"
        with torch.cuda.stream(side):
            seen = copied.cpu()  # ordered on side only: the copy is there once side is done
        assert torch.equal(seen, source.cpu())
        torch.cuda.synchronize()
