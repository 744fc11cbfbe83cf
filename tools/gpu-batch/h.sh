# GPU batch H: the review's CUDA-side fixes and the stop fixes, on the final tree: core CUDA and DLPack tests,
# a torch tensor kept past interpreter teardown, the read path at 30 Hz, the two stop tests that failed in run 19.
source tools/gpu-batch/setup.sh
echo "== core CUDA"; timeout 70 pytest -q -rfEs --timeout 60 ros2_cuda_ipc_core/test/test_cuda.py ros2_cuda_ipc_core/test/test_typed_cuda.py ros2_cuda_ipc_core/test/test_dlpack.py 2>&1 | tail -4
echo "== tensor past teardown"; timeout 30 python3 -c "import sys,numpy as np,torch
from ros2_cuda_ipc_core import BlockManager, Reader
p=BlockManager(1<<20,memory='cuda'); c=p.acquire_for_publish().prepare_publish()
h=Reader().read(c); sys.kept=torch.from_dlpack(h.view((256,),np.uint8)); print('ok')"; echo "rc=$?"
echo "== cost"; timeout 30 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 300 2>&1 | tail -6
echo "== stops"; timeout 150 pytest -q -rfE --timeout 140 ros2_cuda_ipc_examples/test/test_components.py::test_each_component_as_its_own_process_stops_on_sigint ros2_cuda_ipc_examples/test/test_demo.py ros2_cuda_ipc_examples/test/test_pipeline.py::test_fanout_as_separate_processes 2>&1 | tail -6
date -u
