# GPU batch C: the final code: whole suite (two-GPU tests included), the read path at 30 Hz, lidar, the demo.
set -o pipefail; export PYTHONUNBUFFERED=1 ROS_DOMAIN_ID=45
nvidia-smi -L; date -u
sed -i -E '/^(mypy|mypy_extensions|librt|ast_serialize|pathspec|ruff)==/d' requirements/kilted.txt
python3 tools/workspace.py setup --into-env --python python3 --wheelhouse wheelhouse 2>&1 | grep -v WARNING | tail -1
source .workspace/env.sh
echo "== pytest"; timeout 355 pytest -q -rfEs --timeout 150 --durations=12 2>&1 | tee $OUT/pytest.log | tail -32
echo "== read path at 30 Hz"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 450 2>&1 | tee $OUT/cost.log
echo "== lidar"; timeout 35 pipeline lidar --seconds 10 --memory cuda --out /tmp/lidar 2>&1 | tail -4 | tee $OUT/lidar.log
echo "== demo"; timeout 75 python3 -m ros2_cuda_ipc_examples.demo --out /tmp/demo 2>&1 | tail -24 | tee $OUT/demo.log; date -u
