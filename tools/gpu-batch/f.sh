# GPU batch F: the read path before (d546345's core, in tools/gpu-batch/before) and after all the read-path
# changes, interleaved; the per-step profile after; the benchmark's torch consumer; then the GPU suite, part 1.
source tools/gpu-batch/setup.sh
before() { PYTHONPATH=$PWD/tools/gpu-batch/before:$PYTHONPATH "$@"; }
for round in 1 2; do
  echo "== before $round"; before timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 450 2>&1 | tee $OUT/cost-before-$round.log
  echo "== after $round"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 450 2>&1 | tee $OUT/cost-after-$round.log
  echo "== torch before $round"; before timeout 30 python3 tools/profile_read.py steps --torch --no-wrap --count 300 2>&1 | tee $OUT/torch-before-$round.log
  echo "== torch after $round"; timeout 30 python3 tools/profile_read.py steps --torch --no-wrap --count 300 2>&1 | tee $OUT/torch-after-$round.log
done
echo "== after host"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory host --rate 30 --count 450 2>&1 | tee $OUT/cost-after-host.log
echo "== after 100 Hz"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 100 --count 900 2>&1 | tee $OUT/cost-after-100.log
echo "== steps cuda after"; timeout 25 python3 tools/profile_read.py steps --memory cuda --count 300 2>&1 | tee $OUT/steps-cuda.log
echo "== floor cuda"; timeout 25 python3 tools/profile_read.py floor --memory cuda --count 300 2>&1 | tee $OUT/floor-cuda.log
echo "== benchmark"; timeout 150 benchmark --mode latency --transports cuda host floor --payloads 1920x1080 3840x2160 --rates 30 --frames 200 --case-seconds 10 --out $OUT/bench 2>&1 | grep -A16 "^### Latency\|^### Where"
rm -f $OUT/bench/results.json
echo "== GPU suite part 1"; timeout 200 pytest -q -rfEs --timeout 120 --durations=10 --junitxml=$OUT/part1.xml tools/test ros2_cuda_ipc_msgs/test ros2_cuda_ipc_core/test ros2_cuda_ipc_image/test ros2_cuda_ipc_pointcloud/test 2>&1 | tee $OUT/pytest-part1.log | tail -25
date -u
