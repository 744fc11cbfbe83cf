"""Real processes for test_tensor_cuda.py: torch bfloat16 and float8 tensors in CUDA blocks, and a reader that
checks every one is the mapping itself (zero copy), bit for bit, and that clone=True is a copy."""

from ack_flow import receive_acknowledged
from peers import peer_node, play
from tensor_cases import bits, publish_through_all

from ros2_cuda_ipc_msgs.msg import GpuTensor
from ros2_cuda_ipc_tensor import TensorPublisher, TensorReader

TOPIC = "tensor_test_cuda"
DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
SHAPE = (4, 3, 64, 64)


def expected(torch, seq: int):
    """Message ``seq``'s dtype and its bits (a host tensor of the storage type), batches of 1 to 4."""
    name = DTYPES[seq % len(DTYPES)]
    return name, torch.from_numpy(bits(name, seq, seq % SHAPE[0] + 1, SHAPE))


def publisher(count: str) -> dict:
    import torch

    from ros2_cuda_ipc_tensor.torch import allocate_tensor_msg, from_output_tensor_msg

    with peer_node("tensor_cuda_publisher") as node:
        pubs = {name: TensorPublisher(node, TOPIC, shape=SHAPE, dtype=getattr(torch, name), memory="cuda",
                                      block_count=2, qos=100, reuse_delay=0) for name in DTYPES}

        def publish(seq: int) -> None:
            name, storage = expected(torch, seq)
            frame = allocate_tensor_msg(storage.shape, getattr(torch, name), "cuda", publisher=pubs[name], timeout=5.0)
            with frame:
                from_output_tensor_msg(frame).copy_(storage.cuda().view(getattr(torch, name)))
                frame.publish(torch.cuda.current_stream())

        return {"published": publish_through_all(node, TOPIC, list(pubs.values()), int(count), publish)}


def subscriber(count: str) -> dict:
    import torch

    from ros2_cuda_ipc_tensor.torch import from_input_tensor_msg

    tensors = TensorReader()

    def check(msg: GpuTensor, seq: int) -> list[str]:
        name, storage = expected(torch, seq)
        problems = []
        with tensors.read(msg, torch.cuda.current_stream()) as view:
            mapping = view.handle.device_ptr + view.layout.offset
            seen = torch.from_dlpack(view)
            if seen.dtype != getattr(torch, name) or seen.data_ptr() != mapping:
                problems.append(f"message {seq}: {seen.dtype} at {seen.data_ptr():#x}, the mapping is at {mapping:#x}")
            del seen
        shared = from_input_tensor_msg(msg, clone=False, reader=tensors)
        copied = from_input_tensor_msg(msg, clone=True, reader=tensors)
        if shared.data_ptr() != mapping or copied.data_ptr() == mapping:
            problems.append(f"message {seq}: clone=False at {shared.data_ptr():#x}, clone=True at "
                            f"{copied.data_ptr():#x}, the mapping at {mapping:#x}")
        for what, tensor in (("shared", shared), ("copied", copied)):
            raw = tensor.contiguous().view(torch.uint8).cpu().numpy().tobytes()
            if raw != storage.contiguous().view(torch.uint8).numpy().tobytes():
                problems.append(f"message {seq} ({name}, {what}): the bits differ")
        del shared
        torch.cuda.current_stream().synchronize()
        return problems

    with peer_node("tensor_cuda_subscriber") as node:
        result = receive_acknowledged(node, TOPIC, GpuTensor, int(count), tensors.reader, check, item="message")
    return result


if __name__ == "__main__":
    play({"publisher": publisher, "subscriber": subscriber})
