# GPU batch E: the read path before (HEAD's core, copied to tools/gpu-batch/before) and after the context-free
# driver calls and the trims, interleaved on one machine; core GPU tests; the benchmark's torch consumer.
source tools/gpu-batch/setup.sh
before() { PYTHONPATH=$PWD/tools/gpu-batch/before:$PYTHONPATH "$@"; }
for round in 1 2; do
  echo "== before $round"; before timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 450 2>&1 | tee $OUT/cost-before-$round.log
  echo "== after $round"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 450 2>&1 | tee $OUT/cost-after-$round.log
done
echo "== after host"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory host --rate 30 --count 450 2>&1 | tee $OUT/cost-after-host.log
echo "== steps cuda after"; timeout 25 python3 tools/profile_read.py steps --memory cuda --count 300 2>&1 | tee $OUT/steps-cuda.log
echo "== torch before"; before timeout 30 python3 tools/profile_read.py steps --torch --no-wrap --count 300 2>&1 | tee $OUT/torch-before.log
echo "== torch after"; timeout 30 python3 tools/profile_read.py steps --torch --no-wrap --count 300 2>&1 | tee $OUT/torch-after.log
echo "== core GPU tests"; timeout 200 pytest -q -rfEs --timeout 120 ros2_cuda_ipc_core 2>&1 | tee $OUT/pytest-core.log | tail -8
echo "== benchmark"; timeout 100 benchmark --mode latency --transports cuda host floor --payloads 1920x1080 --rates 30 --frames 200 --case-seconds 10 --out $OUT/bench 2>&1 | grep -A12 "^### Latency\|^### Where"
date -u
