# GPU batch G (nvidia-h200-x2): the GPU suite, part 2 (examples) and the two-GPU tests; the read path and the
# benchmark with every change of the session (publish path included).
source tools/gpu-batch/setup.sh
echo "== two GPUs"; timeout 60 pytest -q -rfEs --timeout 50 ros2_cuda_ipc_core/test/test_cuda.py -k "device or two" 2>&1 | tail -4
echo "== GPU suite part 2"; timeout 330 pytest -q -rfE --timeout 150 --durations=12 --junitxml=$OUT/part2.xml ros2_cuda_ipc_examples/test 2>&1 | tee $OUT/pytest-part2.log | tail -22
echo "== cost"; timeout 40 python3 -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 450 2>&1 | tee $OUT/cost.log
echo "== benchmark"; timeout 120 benchmark --mode latency --transports cuda host floor --payloads 1920x1080 3840x2160 --rates 30 --frames 200 --case-seconds 10 --out $OUT/bench 2>&1 | grep -A16 "^### Latency\|^### Where"
rm -f $OUT/bench/results.json
date -u
