#!/usr/bin/env bash
# The whole test suite in one call, its test files in parallel: each file is its own pytest process on its own
# ROS domain (DDS traffic of one never reaches another), its own --basetemp (pytest prunes old temporary
# directories, a sibling's among them) and its own log. Plain bash, no pytest-xdist needed.
#
#   tools/gpu-suite.sh [-j JOBS] [-t SECONDS_PER_FILE] [-o LOG_DIR] [-f "FILE ..."] [-- PYTEST_ARGS...]
#
# -f runs only the files named (a quick check of the script itself).
# JOBS (default: CPU cores / 2, at least 2) files run at once, the longest-running files first so the tail is
# short. Exit status 0 when every file passed (skips are fine), else 1; the per-file lines and the failing
# files' last lines end the output. Run from the repository root with the workspace's environment sourced.
set -u -o pipefail

jobs=$(( $(nproc) / 2 )); (( jobs < 2 )) && jobs=2
per_file=420
logs=gpu-suite-logs
only=""
while (( $# )); do
    case "$1" in
        -j) jobs=$2; shift 2 ;;
        -t) per_file=$2; shift 2 ;;
        -o) logs=$2; shift 2 ;;
        -f) only=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-suite.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ && "$per_file" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-suite.sh: -j and -t take positive integers" >&2; exit 2; }

# Slowest first (what runs whole pipelines and processes), each of their tests a job of its own: a file of
# pipelines run one after another would be the whole call's length. The rest, a file a job, in name order.
# Run 24: whole files of one to two minutes (the bag tools', the CLI tests) started last in name order and made
# the tail; as tests of their own, first, they spread over the jobs.
slow=(ros2_cuda_ipc_tools/test/test_bag.py ros2_cuda_ipc_examples/test/test_soak.py
      ros2_cuda_ipc_examples/test/test_cli.py ros2_cuda_ipc_tools/test/test_bag_cuda.py
      tools/test/test_profile_delivery.py ros2_cuda_ipc_examples/test/test_pipeline.py
      ros2_cuda_ipc_examples/test/test_pipeline_cli.py ros2_cuda_ipc_examples/test/test_demo.py
      tools/test/test_readme_snippets.py ros2_cuda_ipc_examples/test/test_upstream.py
      ros2_cuda_ipc_examples/test/test_benchmark.py ros2_cuda_ipc_examples/test/test_components.py
      ros2_cuda_ipc_tools/test/test_bag_hostile.py ros2_cuda_ipc_image/test/test_image_direct.py)
files=()
for f in "${slow[@]}"; do
    [[ -f "$f" ]] || continue
    while IFS= read -r id; do files+=("$id"); done < <(python -m pytest -q --collect-only -p no:cacheprovider "$f" 2>/dev/null | grep "::")
done
while IFS= read -r f; do
    [[ " ${slow[*]} " == *" $f "* ]] || files+=("$f")
done < <(ls tools/test/test_*.py ros2_cuda_ipc_*/test/test_*.py 2>/dev/null | sort)

if [[ -n "$only" ]]; then read -r -a files <<< "$only"; fi
# Run alone after the others, one at a time: a test that measures the whole device (its free memory moves by
# running siblings' allocations too), and the GL viewer's and the tensor's GPU files (with ten siblings loading
# the CPUs and the GPU their files ran past 300 s where alone they take under 40 s: run 21).
exclusive=(ros2_cuda_ipc_core/test/test_cuda.py::test_50_closed_cuda_pools_give_back_gpu_memory_and_fds
           ros2_cuda_ipc_tools/test/test_viewer.py ros2_cuda_ipc_tools/test/test_viewer_cuda.py
           ros2_cuda_ipc_tensor/test/test_tensor_cuda.py)
deselect=(); for id in "${exclusive[@]}"; do deselect+=(--deselect "$id"); done
kept=(); for f in "${files[@]}"; do [[ " ${exclusive[*]} " == *" $f "* ]] || kept+=("$f"); done; files=("${kept[@]}")
rm -rf "$logs"; mkdir -p "$logs"
started=$(date +%s)
echo "gpu-suite: ${#files[@]} jobs (test files, and the slow files' tests one by one), $jobs at a time, ${per_file} s each at most; logs in $logs/"
# ROS domains 60 and up, one per running job: a job takes the first free slot (mkdir is atomic) and frees it
# at its end, so the domains stay below 101 (higher ones reach into Linux's ephemeral ports) however many jobs.
(( jobs <= 40 )) || { echo "gpu-suite.sh: at most 40 jobs at once (ROS domains 60-100)" >&2; exit 2; }
# Each job's temporary directory is short (/tmp/gs-<pid>/<n>): tests bind Unix sockets under it, and a socket
# path is at most 107 bytes.
temp_root=/tmp/gs-$$
rm -rf "$temp_root"; mkdir -p "$temp_root"
run_job() {  # run_job INDEX TEST [PYTEST_ARGS...]: one pytest on a free ROS domain
    local index=$1 f=$2 name slot=0; shift 2
    name=$(echo "$f" | tr '/:[] ' '_____' | sed 's/\.py//')
    until mkdir "$logs/slot_$slot" 2>/dev/null; do slot=$(( (slot + 1) % 41 )); done
    ROS_DOMAIN_ID=$(( 60 + slot )) timeout -k 10 "$per_file" python -m pytest -q -rfEs -p no:cacheprovider \
        --basetemp="$temp_root/$index" "$f" "$@" > "$logs/$name.log" 2>&1
    echo $? > "$logs/$name.rc"
    rmdir "$logs/slot_$slot"
}
running=0
index=0
for f in "${files[@]}"; do
    index=$(( index + 1 ))
    run_job "$index" "$f" "${deselect[@]}" "$@" &
    running=$(( running + 1 ))
    if (( running >= jobs )); then wait -n; running=$(( running - 1 )); fi
done
wait
if [[ -z "$only" ]]; then
    # Each test of these at most 120 s, its threads' stacks dumped if it gets there (the viewer's GPU file once
    # hung past 90 s after the others had run): a hang is then a finding with a place, not a lost call.
    for id in "${exclusive[@]}"; do
        index=$(( index + 1 )); run_job "$index" "$id" --timeout 120 --timeout-method thread "$@"; files+=("$id")
    done
fi

failed=0
for f in "${files[@]}"; do
    name=$(echo "$f" | tr '/:[] ' '_____' | sed 's/\.py//')
    rc=$(cat "$logs/$name.rc" 2>/dev/null || echo 99)
    last=$(grep -E "passed|failed|error|no tests ran" "$logs/$name.log" | tail -1)
    printf '%-4s %-60s %s\n' "$([[ $rc == 0 || $rc == 5 ]] && echo ok || echo FAIL)" "$f" "${last:-rc $rc}"
    [[ $rc == 0 || $rc == 5 ]] || failed=$(( failed + 1 ))
done
for f in "${files[@]}"; do
    name=$(echo "$f" | tr '/:[] ' '_____' | sed 's/\.py//')
    rc=$(cat "$logs/$name.rc" 2>/dev/null || echo 99)
    if [[ $rc != 0 && $rc != 5 ]]; then echo "---- $f (exit $rc), last lines:"; tail -40 "$logs/$name.log"; fi
done
echo "gpu-suite: $(( ${#files[@]} - failed )) of ${#files[@]} jobs passed in $(( $(date +%s) - started )) s"
(( failed == 0 ))
