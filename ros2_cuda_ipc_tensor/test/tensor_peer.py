"""Real processes for test_tensor_multiprocess.py: one TensorPublisher per dtype (half of them with transposed
strides) on one topic, and a TensorReader that checks every message bit for bit, over DDS."""

import numpy as np
from ack_flow import receive_acknowledged
from peers import peer_node, play
from tensor_cases import CAPACITY, DIM_NAMES, DTYPES, TRANSPOSED, bits, case, publish_through_all, same_bits

from ros2_cuda_ipc_msgs.msg import GpuTensor
from ros2_cuda_ipc_tensor import TensorPublisher, TensorReader

TOPIC = "tensor_test_every_dtype"


def publisher(count: str) -> dict:
    with peer_node("tensor_test_publisher") as node:
        pubs = {(name, transposed): TensorPublisher(node, TOPIC, shape=CAPACITY, dtype=name, dim_names=DIM_NAMES,
                                                   strides=TRANSPOSED if transposed else None, memory="host",
                                                   block_count=2, qos=100, reuse_delay=0)
                for name in DTYPES for transposed in (False, True)}

        def publish(seq: int) -> None:
            name, batch, transposed = case(seq)
            pub = pubs[(name, transposed)]
            expected = bits(name, seq, batch)
            if seq % 2 and pub.layout.element is None:  # one copy in from any array
                pub.publish_array(expected)
                return
            with pub.borrow(timeout=5.0, shape=expected.shape) as frame:  # or written in place, as its bits
                frame.array[...] = expected
                frame.publish()

        return {"published": publish_through_all(node, TOPIC, list(pubs.values()), int(count), publish)}


def subscriber(count: str) -> dict:
    tensors = TensorReader()
    try:
        import torch
    except ImportError:
        torch = None
    through_dlpack: list[str] = []

    def check(msg: GpuTensor, seq: int) -> list[str]:
        name, batch, transposed = case(seq)
        expected = bits(name, seq, batch)
        with tensors.read(msg) as view:
            problems = []
            if str(view.dlpack_dtype) != name or view.shape != expected.shape or view.dim_names != DIM_NAMES:
                problems.append(f"message {seq}: {view!r}, expected {name} {expected.shape}")
            if view.element_strides != (TRANSPOSED if transposed else (15, 5, 1)):
                problems.append(f"message {seq}: strides {view.element_strides}")
            if view.array.ctypes.data != view.handle.device_ptr:  # the block itself, not a copy
                problems.append(f"message {seq}: the view is not the block's memory")
            if not same_bits(view.array, expected):
                problems.append(f"message {seq} ({name}): the bits differ")
            if view.layout.element is None and not same_bits(np.asarray(view), expected):
                problems.append(f"message {seq} ({name}): np.asarray differs")
            if torch is not None and hasattr(torch, name):
                tensor = torch.from_dlpack(view)
                raw = tensor.contiguous().view(torch.uint8).numpy().reshape(-1)  # its bytes, in logical order
                if tensor.dtype != getattr(torch, name) or raw.tobytes() != np.ascontiguousarray(expected).tobytes():
                    problems.append(f"message {seq} ({name}): torch.from_dlpack differs")
                through_dlpack.append(name)
                del tensor, raw
        return problems

    with peer_node("tensor_test_subscriber") as node:
        result = receive_acknowledged(node, TOPIC, GpuTensor, int(count), tensors.reader, check, item="message")
    return {**result, "through_dlpack": sorted(set(through_dlpack)), "leases_held": tensors.stats()["leases_held"]}


if __name__ == "__main__":
    play({"publisher": publisher, "subscriber": subscriber})
