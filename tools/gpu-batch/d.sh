# GPU batch D: where the CUDA read's time goes at 30 Hz (tools/profile_read.py), before changing anything.
source tools/gpu-batch/setup.sh
for memory in host cuda; do
  echo "== measure_cost $memory"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory $memory --rate 30 --count 450 2>&1 | tee $OUT/cost-$memory.log
done
echo "== calls"; timeout 40 python3 tools/profile_read.py calls --count 40 2>&1 | tee $OUT/calls.log
for memory in host cuda; do
  echo "== floor $memory"; timeout 25 python3 tools/profile_read.py floor --memory $memory --count 300 2>&1 | tee $OUT/floor-$memory.log
  echo "== steps $memory"; timeout 25 python3 tools/profile_read.py steps --memory $memory --count 300 2>&1 | tee $OUT/steps-$memory.log
done
echo "== steps torch"; timeout 30 python3 tools/profile_read.py steps --torch --count 300 2>&1 | tee $OUT/steps-torch.log
echo "== steps torch nowrap"; timeout 30 python3 tools/profile_read.py steps --torch --no-wrap --count 300 2>&1 | tee $OUT/steps-torch-nowrap.log
echo "== benchmark"; timeout 150 benchmark --mode latency --transports cuda host floor --payloads 1920x1080 --rates 30 --frames 200 --case-seconds 10 --out $OUT/bench 2>&1 | tail -30
date -u
