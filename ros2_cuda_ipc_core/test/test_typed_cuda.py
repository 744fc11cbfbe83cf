"""The core typed layer on a real GPU: an aligned field is a torch DLPack view of the block, an unaligned one
refuses DLPack by name yet offers the CUDA Array Interface and copies out dense with one strided copy.

No CUDA kernel ever touches the unaligned field (a misaligned float load is a sticky CUDA error); only
``cuMemcpy2DAsync`` does.  Skips without a GPU.
"""

import numpy as np
import pytest
from gpu_marks import needs_gpu
from typed_cloud import FIELDS, POINT_STEP, RecordLayout, RecordReader, expected

from ros2_cuda_ipc_core import TypedPublisher
from ros2_cuda_ipc_msgs.msg import GpuPointCloud2

pytestmark = needs_gpu
HEIGHT, WIDTH = 128, 1024
LAYOUT = RecordLayout(HEIGHT, WIDTH, row_step=WIDTH * POINT_STEP + 64)


def test_device_fields_dlpack_cai_and_strided_copies(node):
    import torch

    with TypedPublisher(node, "typed_cuda_records", GpuPointCloud2, LAYOUT, memory="cuda") as pub:
        frame = pub.borrow()
        with frame:
            for name in FIELDS:  # host -> device strided copies, one per field
                frame.copy_in(LAYOUT.field(name), expected(name, HEIGHT, WIDTH))
            msg = frame.publish()
        stream = torch.cuda.Stream()
        with RecordReader().read(msg, stream) as view, torch.cuda.stream(stream):
            ring = torch.from_dlpack(view.array_view(LAYOUT.field("ring"), "ring"))
            assert tuple(ring.shape) == (HEIGHT, WIDTH) and ring.stride() == (LAYOUT.row_step // 2, POINT_STEP // 2)
            assert ring.data_ptr() == view.handle.device_ptr + 16  # the block itself, no copy
            np.testing.assert_array_equal(ring.to(torch.int32).cpu().numpy(), expected("ring", HEIGHT, WIDTH))
            del ring

            time = view.array_view(LAYOUT.field("time"), "time")
            with pytest.raises(BufferError, match="time cannot be a DLPack view"):
                torch.from_dlpack(time)
            cai = time.__cuda_array_interface__
            assert cai["data"] == (view.handle.device_ptr + 18, True) and cai["strides"] == (LAYOUT.row_step, 22)
            dense = torch.empty((HEIGHT, WIDTH), dtype=torch.float32, device="cuda")
            view.copy_out(LAYOUT.field("time"), dense, stream)  # device -> device, one strided copy
            np.testing.assert_array_equal(dense.cpu().numpy(), expected("time", HEIGHT, WIDTH))
            host = np.empty((HEIGHT, WIDTH), np.float32)
            view.copy_out(LAYOUT.field("x"), host)  # device -> host
            np.testing.assert_array_equal(host, expected("x", HEIGHT, WIDTH))


def test_a_kept_tensor_is_imported_once_per_block_and_reads_each_frame(node):
    """``kept(torch.from_dlpack)``: the second frame in the same block is the same tensor object (no DLPack import),
    and it reads that frame's bytes; another block is another tensor."""
    import torch

    with TypedPublisher(node, "typed_cuda_kept", GpuPointCloud2, LAYOUT, memory="cuda", block_count=2) as pub:
        reader, stream = RecordReader(), torch.cuda.Stream()
        tensors: dict[int, list] = {}
        for seq in range(6):
            frame = pub.borrow(timeout=5.0)  # the last read's lease goes back once its stream is done
            assert frame is not None
            with frame:
                values = expected("ring", HEIGHT, WIDTH) + seq
                frame.copy_in(LAYOUT.field("ring"), values.astype(np.uint16))
                msg = frame.publish()
            with reader.read(msg, stream) as view, torch.cuda.stream(stream):
                ring = view.array_view(LAYOUT.field("ring"), "ring").kept(torch.from_dlpack)
                np.testing.assert_array_equal(ring.to(torch.int32).cpu().numpy(), values)
                tensors.setdefault(view.handle.block_id, []).append(ring)
        firsts = [kept[0] for kept in tensors.values()]
        assert all(tensor is kept[0] for kept in tensors.values() for tensor in kept)  # one import per block
        assert len(firsts) == len({id(tensor) for tensor in firsts}) and sum(map(len, tensors.values())) == 6
