#!/usr/bin/env bash
# Verify ros2_cuda_ipc on a machine with an NVIDIA GPU, from the repository root:
#
#   tools/gpu-verify.sh                      # setup if needed, every test, then the GPU numbers
#   tools/gpu-verify.sh ros2_cuda_ipc_core   # only these test paths (pytest arguments), then the numbers
#   GPU_VERIFY_NUMBERS=0 tools/gpu-verify.sh # the tests only
#
# Every test runs; on this machine a test that skips because CUDA, a GPU or a GPU library is missing counts
# as a failure (it should have run here).  Then the read path's cost at 30 Hz, the fanout pipeline on CUDA
# memory and the camera -> encoder benchmark, whose numbers go in docs/gpu-verification.md.
# Outputs (pytest log, JUnit XML, pipeline summary, benchmark tables) go to $GPU_VERIFY_OUT (default
# gpu-verify-output/).  Exit code 0 when all of it passed.
#
# Hook: GPU_SUITE_RUNNER is the command that runs the tests, given pytest's arguments (default
# "python -m pytest"); a runner that spreads the suite over several GPUs or processes goes there, as long as
# it takes pytest arguments and prints pytest's "-rs" skip summary.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${GPU_VERIFY_OUT:-gpu-verify-output}
RUNNER=${GPU_SUITE_RUNNER:-python -m pytest}
mkdir -p "$OUT"

nvidia-smi -L || { echo "gpu-verify: nvidia-smi found no NVIDIA GPU here" >&2; exit 2; }
[ -f .workspace/env.sh ] || make setup
# shellcheck disable=SC1091
source .workspace/env.sh
python - <<'PY'
import sys
from ros2_cuda_ipc_core.memory.cuda_driver import unavailable_reason
reason = unavailable_reason(0)
sys.exit(f"gpu-verify: CUDA is not usable here: {reason}" if reason else 0)
PY
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-77} PYTHONUNBUFFERED=1

echo "== tests ($RUNNER)"
status=0
$RUNNER -q -rfEs --junitxml="$OUT/pytest.xml" "$@" 2>&1 | tee "$OUT/pytest.log" || status=1
# A GPU machine runs every GPU test: a skip for want of CUDA, a GPU or torch/cupy ("needs a CUDA GPU ...",
# "no usable CUDA driver", "... is not installed") is a failure here; skips that say a GPU *is* here, or that
# need two GPUs, are not.
if grep -E "^SKIPPED .*(needs a CUDA|needs a GPU|needs torch|no usable CUDA|is not installed)" "$OUT/pytest.log"; then
    echo "gpu-verify: the tests above skipped on a GPU machine" >&2
    status=1
fi

if [ "${GPU_VERIFY_NUMBERS:-1}" != 0 ]; then
    echo "== the read path on CUDA memory, 30 Hz, cross-process (us)"
    timeout 120 python -m ros2_cuda_ipc_core.measure_cost --memory cuda --rate 30 --count 300 | tee "$OUT/cost.log" \
        || status=1
    echo "== the fanout pipeline on CUDA memory, 10 s at 1080p"
    timeout 180 pipeline fanout --memory cuda --seconds 10 --size 1080p --out "$OUT/pipeline" \
        | tail -8 || status=1
    echo "== camera -> encoder, ros2_cuda_ipc (cuda, host) against sensor_msgs"
    timeout 300 benchmark --mode latency --transports cuda host sensor_msgs --payloads 1920x1080 --rates 30 \
        --frames 200 --out "$OUT/benchmark" | grep -A12 "^### Latency" || status=1
fi
date -u
[ "$status" = 0 ] && echo "gpu-verify: OK" || echo "gpu-verify: FAILED (see above and $OUT/)" >&2
exit "$status"
