# GPU batch A: setup, long soaks in the background (GPU 1), the suite and the examples (GPU 0).
set -o pipefail; export PYTHONUNBUFFERED=1 ROS_DOMAIN_ID=41
nvidia-smi -L; date -u
sed -i -E '/^(mypy|mypy_extensions|librt|ast_serialize|pathspec|ruff)==/d' requirements/kilted.txt
python3 tools/workspace.py setup --into-env --python python3 --wheelhouse wheelhouse 2>&1 | grep -v WARNING | tail -3
source .workspace/env.sh
mkdir -p /tmp/soak
(cd /tmp/soak && CUDA_VISIBLE_DEVICES=1 ROS_DOMAIN_ID=42 setsid nohup python3 -m ros2_cuda_ipc_examples.soak --minutes 10 --memory cuda > /tmp/soak/cuda.log 2>&1 < /dev/null &)
(cd /tmp/soak && ROS_DOMAIN_ID=43 setsid nohup python3 -m ros2_cuda_ipc_examples.soak --minutes 10 --memory host > /tmp/soak/host.log 2>&1 < /dev/null &)
export CUDA_VISIBLE_DEVICES=0
echo "== pytest (GPU 0)"; timeout 300 pytest -q -rfEs --timeout 150 2>&1 | tee $OUT/pytest.log | tail -25
echo "== checked setters"; ROS_PYTHON_CHECK_FIELDS=1 timeout 90 pytest -q -rfEs ros2_cuda_ipc_image/test/test_image_bridge.py ros2_cuda_ipc_pointcloud/test 2>&1 | tee $OUT/checkfields.log | tail -4
echo "== costs"; { timeout 60 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda; timeout 90 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30; timeout 60 python3 -m ros2_cuda_ipc_pointcloud.measure_cost --memory cuda; } 2>&1 | tee $OUT/cost.log
echo "== voxel"; timeout 120 python3 -m ros2_cuda_ipc_pointcloud.voxel_example --memory cuda --points 1000000 --clouds 20 2>&1 | tee $OUT/voxel.log | tail -15
echo "== soak status"; tail -c 600 /tmp/soak/cuda.log; tail -c 300 /tmp/soak/host.log; date -u
