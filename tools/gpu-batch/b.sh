# GPU batch B: pipelines and the benchmark on GPU 0, then the soaks' results.
set -o pipefail; export PYTHONUNBUFFERED=1 ROS_DOMAIN_ID=44 CUDA_VISIBLE_DEVICES=0
source .workspace/env.sh; date -u
for size in 1080p 4k; do for c in "" --compose; do echo "== fanout $size $c"; timeout 60 pipeline fanout --seconds 10 --size $size --memory cuda $c --out /tmp/pl-$size$c 2>&1 | tail -14; cp /tmp/pl-$size$c/pipeline-summary.json $OUT/fanout-$size$c.json; done; done
cp /tmp/pl-1080p/preview.png $OUT/preview-1080p.png
echo "== lidar"; timeout 60 pipeline lidar --seconds 10 --memory cuda --out /tmp/pl-lidar 2>&1 | tail -10
echo "== benchmark"; timeout 330 benchmark --rates 30 100 --frames 200 --case-seconds 10 --out /tmp/bench/h200 2>&1 | tail -5
tar czf $OUT/bench.tgz -C /tmp/bench .
echo "== soaks"; while pgrep -f ros2_cuda_ipc_examples.soak >/dev/null; do sleep 5; done; date -u
tail -c 3000 /tmp/soak/cuda.log > $OUT/soak-cuda.txt; tail -c 3000 /tmp/soak/host.log > $OUT/soak-host.txt; cat $OUT/soak-*.txt | tail -60
