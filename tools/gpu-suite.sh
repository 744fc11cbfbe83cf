#!/usr/bin/env bash
# The whole test suite in one call, its test files in parallel: each file is its own pytest process on its own
# ROS domain (DDS traffic of one never reaches another), its own --basetemp (pytest prunes old temporary
# directories, a sibling's among them), its own process group (what a job leaves running is listed in its log and
# killed when it ends, so it cannot disturb a later job) and its own log. Plain bash, no pytest-xdist needed.
#
#   tools/gpu-suite.sh [--gpu-only] [-j JOBS] [-t SECONDS_PER_FILE] [-T SECONDS_IN_ALL] [-o LOG_DIR] [-f "FILE ..."]
#                      [-- PYTEST_ARGS...]
#
# --gpu-only runs only the tests that skip without a GPU (conftest.py's `cuda` marker, collected with the GPU
# hidden: CUDA_VISIBLE_DEVICES=), the CUDA pipelines among them; default budget 180 s.
# -f runs only the files named (a quick check of the script itself).
# First the exclusive files, alone, one at a time; then JOBS (default: one a CPU core, at least 2: the jobs wait on
# processes and frames more than they compute; 16 on a 16-core H100 fit 420 s, 14 did not: session 21) files at once,
# the longest-running files first so the tail is short. -T (default 420 s) bounds the call: a job gets at most
# what is left, and a job not started in time is listed as not run (the results are then partial; the exclusive
# files having gone first, what a run over its budget cuts is parallel jobs).
# Exit status 0 when every job passed (skips are fine), else 1; Ctrl-C or SIGTERM ends it within a second with
# exit status 0, saying its results are partial. The per-job lines (with seconds), the slowest jobs, the failing
# jobs' last lines and the processes holding the GPU end the output. Run from the repository root with the
# workspace's environment sourced.
set -u -o pipefail

jobs=$(nproc); (( jobs < 2 )) && jobs=2; (( jobs > 30 )) && jobs=30
per_file=420
budget=""
logs=gpu-suite-logs
only=""
gpu_only=0
while (( $# )); do
    case "$1" in
        -j) jobs=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
        -t) per_file=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
        -T) budget=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
        -o) logs=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
        -f) only=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
        --gpu-only) gpu_only=1; shift ;;
        --) shift; break ;;
        -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-suite.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ -n "$budget" ]] || budget=$(( gpu_only ? 180 : 420 ))
for n in "$jobs" "$per_file" "$budget"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-suite.sh: -j, -t and -T take positive integers" >&2; exit 2; }
done
domains=${GPU_SUITE_DOMAINS:-60}
[[ "$domains" =~ ^[0-9]{1,3}$ ]] && (( (domains >= 51 && domains <= 66) || domains <= 10 )) ||
    { echo "gpu-suite.sh: GPU_SUITE_DOMAINS must be 0-10 or 51-66 (30 domains from it, below 96, a test's" \
           "own, and clear of the exclusive files' 40-50)" >&2; exit 2; }
(( jobs <= 30 )) || { echo "gpu-suite.sh: at most 30 jobs at once (one ROS domain each, $domains-$(( domains + 29 )))" >&2; exit 2; }
# The log folder is emptied first: only one this script made (or an empty or new one), never a folder of other files.
if [[ -z "$logs" ]] || { [[ -e "$logs" && ! -e "$logs/.gpu-suite" ]] && [[ -n "$(ls -A "$logs" 2>/dev/null)" || ! -d "$logs" ]]; }; then
    echo "gpu-suite.sh: -o '$logs' is not a log folder of this script (nor empty, nor new): refusing to empty it" >&2
    exit 2
fi
started=$(date +%s)

# A job is a file, a test id, or (--gpu-only) a file's selected ids joined by SEP (ASCII's unit separator: a test id
# may hold spaces, parametrized by text, so a space cannot part two ids); its name is a file name.
SEP=$'\x1f'
job_name() { local id=$1; [[ "$id" == *"$SEP"* ]] && id="${id%%::*}::selected"; id=${id//.py/}; id=${id//[^A-Za-z0-9._-]/_}; echo "${id:0:150}"; }
# The pids whose environment holds a line matching the extended regex $1 whole (a job's mark).
marked() { grep -lazxE "$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
# /dev/shm as the tests find it: Fast DDS's segments and port semaphores that killed processes left behind stay
# there, and a small /dev/shm (a container's 64 MiB) fills with them.
shm_line() { echo "$(find /dev/shm -maxdepth 1 -type f 2>/dev/null | wc -l) files, $(df -h --output=used,size /dev/shm 2>/dev/null | tail -1 | xargs) used/size"; }
label() { local words; IFS=$SEP read -r -a words <<< "$1"; (( ${#words[@]} > 1 )) && echo "${1%%::*} (${#words[@]} tests)" || echo "$1"; }
# Processes that hold an NVIDIA device open (pid, state, command), this script's own jobs among them while they run.
gpu_users() {
    local pid
    for pid in $(find /proc/[0-9]*/fd -maxdepth 1 -lname '/dev/nvidia*' -printf '%h\n' 2>/dev/null | cut -d/ -f3 | sort -un); do
        printf '  pid %-7s state %s  %s\n' "$pid" "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" \
            "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-150)"
    done
}

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
# Run alone before the others, one at a time: a test that measures the whole device (its free memory moves by
# running siblings' allocations too), and the GL viewer's and the tensor's GPU files (with ten siblings loading
# the CPUs and the GPU their files ran past 300 s where alone they take under 40 s: run 21; run together, the three
# took 75-83 s and did not finish, where one after the other takes about 90 s: session 9), and the 4K MCAP recording,
# which holds that the recorder keeps up with a disk it has to itself (session 20, H100: with 14 jobs writing beside
# it the disk took its first second at 435 MB/s, under the camera's 1 GB/s, and 24 frames were dropped).
exclusive=(ros2_cuda_ipc_core/test/test_cuda.py::test_50_closed_cuda_pools_give_back_gpu_memory_and_fds
           ros2_cuda_ipc_tools/test/test_viewer.py ros2_cuda_ipc_tools/test/test_viewer_cuda.py
           ros2_cuda_ipc_tensor/test/test_tensor_cuda.py
           "ros2_cuda_ipc_tools/test/test_bag_cuda.py::test_4k_rgba8_at_30_hz_records_every_frame_that_the_storage_can_take[mcap]")
# Of those, files of many short tests (3-6 s each on the H200, most of it pytest's own start: 78 and 34 jobs in
# session 9's run) run 6 tests a job.
short_tests=(ros2_cuda_ipc_examples/test/test_cli.py ros2_cuda_ipc_examples/test/test_components.py)
is_slow() { [[ " ${slow[*]} " == *" ${1%%::*} "* ]]; }
exclusive_of() { local e; for e in "${exclusive[@]}"; do [[ "$1" == "$e" || "$1" == "$e::"* ]] && echo "$e" && return 0; done; return 1; }
is_exclusive() { exclusive_of "$1" > /dev/null; }

files=()      # the parallel jobs
alone=()      # the exclusive jobs
if [[ -n "$only" ]]; then
    read -r -a files <<< "$only"
elif (( gpu_only )); then
    # The selection: what conftest.py marks `cuda` where no GPU is visible (the tests a CPU machine skips).
    collected=$(CUDA_VISIBLE_DEVICES="" python -m pytest -q --collect-only -m cuda -p no:cacheprovider \
                    --continue-on-collection-errors "$@" 2>&1)
    mapfile -t selected < <(grep -E "^[^ ]+\.py::[^ ]" <<< "$collected")
    grep -q "^ERROR" <<< "$collected" && printf 'gpu-suite: the selection could not collect everything:\n%s\n' \
        "$(grep "^ERROR" <<< "$collected")" >&2
    (( ${#selected[@]} )) || { echo "gpu-suite.sh: --gpu-only selected no test (see: CUDA_VISIBLE_DEVICES= python -m pytest --collect-only -m cuda)" >&2; exit 1; }
    declare -A by_file=() by_exclusive=()
    for id in "${selected[@]}"; do
        if is_exclusive "$id"; then by_exclusive[$(exclusive_of "$id")]+="$id$SEP"
        elif is_slow "$id"; then files+=("$id")
        else by_file[${id%%::*}]+="$id$SEP"; fi
    done
    mapfile -t grouped < <(printf '%s\n' "${!by_file[@]}" | sort)
    for f in "${grouped[@]}"; do [[ -n "$f" ]] && files+=("${by_file[$f]%"$SEP"}"); done
    for e in "${exclusive[@]}"; do [[ -n "${by_exclusive[$e]:-}" ]] && alone+=("${by_exclusive[$e]%"$SEP"}"); done
else
    present=(); for f in "${slow[@]}"; do [[ -f "$f" ]] && present+=("$f"); done
    # One collection for all of them (one pytest start, not fourteen).
    declare -A chunk=() in_chunk=() gave_ids=()
    add_id() {  # a slow file's test: a job of its own, or one of up to 6 of a file of short tests
        local file=${1%%::*}
        gave_ids[$file]=1
        if [[ " ${short_tests[*]} " != *" $file "* ]]; then files+=("$1"); return; fi
        chunk[$file]+="${chunk[$file]:+$SEP}$1"; in_chunk[$file]=$(( ${in_chunk[$file]:-0} + 1 ))
        (( in_chunk[$file] < 6 )) && return
        files+=("${chunk[$file]}"); chunk[$file]=""; in_chunk[$file]=0
    }
    (( ${#present[@]} )) && while IFS= read -r id; do add_id "$id"; done < <(python -m pytest -q --collect-only \
                                                           -p no:cacheprovider "${present[@]}" 2>/dev/null | grep "::")
    for f in "${!chunk[@]}"; do [[ -n "${chunk[$f]}" ]] && files+=("${chunk[$f]}"); done
    # A slow file that gave no ids (it does not import, say) is a job of its own, so its error is a failing job.
    for f in "${present[@]}"; do [[ -n "${gave_ids[$f]:-}" ]] || files+=("$f"); done
    while IFS= read -r f; do
        is_slow "$f" || is_exclusive "$f" || files+=("$f")
    done < <(shopt -s nullglob; printf "%s\n" tools/test/test_*.py ros2_cuda_ipc_*/test/test_*.py | sort)
    kept=(); for f in "${files[@]}"; do is_exclusive "$f" || kept+=("$f"); done; files=("${kept[@]}")
    for f in "${exclusive[@]}"; do [[ -f "${f%%::*}" ]] && alone+=("$f"); done
fi
deselect=(); (( gpu_only )) || for id in "${exclusive[@]}"; do deselect+=(--deselect "$id"); done

rm -rf "$logs"; mkdir -p "$logs"; : > "$logs/.gpu-suite"
# Each job's temporary directory is short (/tmp/gs-<pid>/<n>): tests bind Unix sockets under it, and a socket
# path is at most 107 bytes.
temp_root=/tmp/gs-$$
rm -rf "$temp_root"; mkdir -p "$temp_root"
echo "gpu-suite: ${#files[@]} parallel jobs$( (( gpu_only )) && echo " (--gpu-only: ${#selected[@]} tests)"), $jobs at a time, after ${#alone[@]} alone; ${per_file} s a job, ${budget} s in all; logs in $logs/"
echo "gpu-suite: /dev/shm: $(shm_line)"
# The machine as the first job meets it: a run after other work has found it busy (session 9) or not (session 21).
echo "gpu-suite: load average $(cut -d' ' -f1-3 /proc/loadavg); the busiest processes now:"
top -b -n 2 -d 0.5 -w 160 2>/dev/null | awk '/^top -/ { frame++ } frame == 2' | sed -n '8,12p' | sed 's/^/  /'
users=$(gpu_users)
[[ -z "$users" ]] || printf 'gpu-suite: already holding the GPU before the first job (their load and their DDS traffic\nmeet the tests; a hang in an earlier run leaves such processes):\n%s\n' "$users"

# ROS domains 60 to 89 (GPU_SUITE_DOMAINS moves the 60: a test running this script beside the suite), one per
# running job: a job takes the first free slot (mkdir is atomic) and frees it at its end (below 96: a test's own;
# above 100 they reach into Linux's ephemeral ports). The exclusive jobs run on domains 50 and down, which no
# earlier job used: a participant an earlier job left (a pipeline's node runs in a
# session of its own) cannot leave during their teardown, which is Fast DDS 3.2's deletion deadlock (decisions.md).
alone_domain=""
run_job() {  # run_job INDEX NAME SECONDS PYTEST_ARGS...: one pytest on a free ROS domain, in its own process group
    local index=$1 name=$2 seconds=$3 slot=0 domain group rc begin left; shift 3
    until mkdir "$logs/slot_$slot" 2>/dev/null; do slot=$(( (slot + 1) % 30 )); (( slot )) || sleep 0.1; done
    domain=${alone_domain:-$(( domains + slot ))}
    begin=$(date +%s)
    # timeout makes itself a process group leader: the job's group is its pid. SIGINT first, so pytest prints where
    # it was and what ran; SIGKILL 10 s later. faulthandler_timeout: a test still running after 60 s writes every
    # thread's Python stack into the log from a C thread, a hang that holds the GIL included.
    GPU_SUITE_JOB="$$:$index" PYTHONUNBUFFERED=1 ROS_DOMAIN_ID=$domain timeout -s INT -k 10 "$seconds" python -m pytest -q -rfEs -p no:cacheprovider \
        -o faulthandler_timeout=60 --basetemp="$temp_root/$index" "$@" > "$logs/$name.log" 2>&1 &
    group=$!
    echo "$group" > "$logs/$name.group"
    wait "$group"; rc=$?
    # What the job left: its process group, and what escaped it into a session of its own but still carries the
    # job's mark in its environment (GPU_SUITE_JOB: this run's and this job's own, whatever ROS domain a test set;
    # a suite a test runs marks its own jobs, so it cannot take this run's).
    left=$(ps -e -o pid=,pgid=,stat=,args= | awk -v g="$group" '$2 == g && $3 !~ /^Z/' | cut -c1-200)
    if [[ -n "$left" ]]; then
        printf '\ngpu-suite: still running when the job ended (killed now):\n%s\n' "$left" >> "$logs/$name.log"
        kill -KILL -- "-$group" 2>/dev/null
    fi
    left=$(marked "GPU_SUITE_JOB=$$:$index" | while read -r pid; do
               [[ "$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')" == "$group" ]] || echo "$pid"; done)
    if [[ -n "$left" ]]; then
        printf '\ngpu-suite: still running in a session of its own (killed now):\n%s\n' \
            "$(ps -o pid=,stat=,args= -p "${left//$'\n'/,}" | cut -c1-200)" >> "$logs/$name.log"
        kill -KILL $left 2>/dev/null
    fi
    # A failed job's own logs (a peer's steps and stacks, a pipeline's node logs), small files only.
    if (( rc != 0 && rc != 5 )) && [[ -d "$temp_root/$index" ]]; then
        (cd "$temp_root/$index" && find . -type f \( -name '*.log' -o -name '*.txt' -o -name '*.jsonl' -o -name '*.json' \) -size -2M \
            -print0 | tar --null -czf "$logs/$name.files.tgz" -T - 2>/dev/null)
    fi
    echo "$rc" > "$logs/$name.rc"
    echo $(( $(date +%s) - begin )) > "$logs/$name.seconds"
    rm -f "$logs/$name.group"
    rmdir "$logs/slot_$slot"
}
left_s() { echo $(( budget - ($(date +%s) - started) )); }
job_seconds() { local left; left=$(left_s); (( left < per_file )) && echo "$left" || echo "$per_file"; }

summary() {  # summary [interrupted]: the per-job lines, the slowest, the failures' last lines; the exit status
    local i f name rc last status secs failed=0 not_run=0 cut=0 line failures=()
    echo
    for i in "${!planned[@]}"; do
        f=${planned[$i]}; name=${names[$i]}; rc=""; secs=-; last=""
        [[ -f "$logs/$name.rc" ]] && read -r rc < "$logs/$name.rc"
        [[ -f "$logs/$name.seconds" ]] && read -r secs < "$logs/$name.seconds"
        [[ -n "${1:-}" && $rc == 137 ]] && rc=""  # killed by the interrupt, its end written meanwhile
        if [[ -z "$rc" && -f "$logs/$name.log" ]]; then status=STOPPED; not_run=$(( not_run + 1 )); last="killed by the interrupt"
        elif [[ -z "$rc" ]]; then status="NOT RUN"; not_run=$(( not_run + 1 ))
        else
            [[ -n "${1:-}" ]] || last=$(grep -E "passed|failed|error|no tests ran|skipped" "$logs/$name.log" | tail -1)
            if [[ $rc == 0 || $rc == 5 ]]; then status=ok
            else
                status=FAIL; failed=$(( failed + 1 )); failures+=("$i")
                [[ $rc == 124 || $rc == 137 ]] && last="cut at its time limit; $last" && cut=$(( cut + 1 ))
            fi
        fi
        line=$(label "$f")
        printf '%-7s %4s s  %-70s %s\n' "$status" "$secs" "${line:0:70}" "${last:-${rc:+rc $rc}}"
        [[ $secs == - ]] || slowest+=("$secs $line")
    done
    (( ${#slowest[@]} )) && echo "-- slowest jobs:" && printf '%s\n' "${slowest[@]}" | sort -rn | head -8 | sed 's/^/  /'
    for i in "${failures[@]}"; do
        read -r rc < "$logs/${names[$i]}.rc"
        echo "---- $(label "${planned[$i]}") (exit $rc; $logs/${names[$i]}.log), last lines:"
        tail -60 "$logs/${names[$i]}.log"
    done
    line=$(gpu_users)
    [[ -z "$line" ]] || printf -- '-- still holding the GPU now:\n%s\n' "$line"
    echo "gpu-suite: $(( ${#planned[@]} - failed - not_run )) of ${#planned[@]} jobs passed in $(( $(date +%s) - started )) s${1:+, interrupted}$( (( not_run + cut )) && echo "; $not_run not run or stopped, $cut cut at a time limit (PARTIAL results)")"
    (( failed == 0 && not_run == 0 ))
}

interrupted() {  # Ctrl-C or SIGTERM: every job's process group killed, the summary so far, exit 0
    trap '' INT TERM
    local g
    for g in "$logs"/*.group; do [[ -f "$g" ]] && kill -KILL -- "-$(cat "$g")" 2>/dev/null; done
    # and whatever this run's jobs started in sessions of their own (or started before their group was written)
    kill -KILL $(marked "GPU_SUITE_JOB=$$:[0-9]+") 2>/dev/null
    summary interrupted  # without waiting for the jobs' own ends: those killed show as STOPPED
    echo "gpu-suite: interrupted: the results above are PARTIAL"
    exit 0
}
trap interrupted INT TERM

# The parallel jobs longest first, by the seconds a run on the H200 took (tools/gpu-suite-seconds.txt; 5 s for a job
# it does not list): with 14 at a time, whole files of a minute started late in name order made a 50 s tail.
# A job of a file's selected tests (--gpu-only) counts its file's seconds.
seconds_table=${GPU_SUITE_SECONDS:-$(dirname "$0")/gpu-suite-seconds.txt}
[[ -f "$seconds_table" ]] || echo "gpu-suite: no table of seconds at $seconds_table: the jobs start in name order" >&2
declare -A known_seconds=()
while read -r secs name; do [[ "$secs" =~ ^[0-9]+$ ]] && known_seconds[$name]=$secs; done \
    < <(grep -v '^#' "$seconds_table" 2>/dev/null)
job_seconds_known() { local name; name=$(job_name "$1"); echo "${known_seconds[$name]:-${known_seconds[$(job_name "${1%%::*}")]:-5}}"; }
mapfile -t order < <(for i in "${!files[@]}"; do echo "$(job_seconds_known "${files[$i]}") $i"; done \
                     | sort -s -k1,1rn | cut -d' ' -f2)
sorted=(); for i in "${order[@]}"; do sorted+=("${files[$i]}"); done; files=("${sorted[@]}")
planned=("${alone[@]}" "${files[@]}")
names=(); slowest=()
declare -A taken=()  # two ids may reduce to one name: the later gets its index
for i in "${!planned[@]}"; do
    name=$(job_name "${planned[$i]}"); [[ -n "${taken[$name]:-}" ]] && name="${name}_$(( i + 1 ))"
    taken[$name]=1; names+=("$name")
done
index=0
# The exclusive files first, alone, one at a time, on ROS domains 50 and down. After other GPU work the viewer's GPU
# file drew 2 frames and then none, three runs of three on a quiet machine (session 10: a fresh ROS domain, readiness
# by events too, the stale /dev/shm/cuda.shm.* removed); on a fresh machine it passes. Its cause is not found; run
# first, it meets the machine as it passes there. Each test at most 120 s, its threads' stacks dumped if it gets
# there: a hang is a finding with a place, not a lost call.
for id in "${alone[@]}"; do
    index=$(( index + 1 ))
    (( $(left_s) > 0 )) || break
    IFS=$SEP read -r -a ids <<< "$id"
    alone_domain=$(( 51 - index ))
    run_job "$index" "${names[$(( index - 1 ))]}" "$(job_seconds)" "${ids[@]}" --timeout 120 --timeout-method thread "$@"
done
alone_domain=""
index=${#alone[@]}  # where the parallel jobs' names begin, whether or not every exclusive file ran
running=0
for f in "${files[@]}"; do
    index=$(( index + 1 ))
    (( $(left_s) > 0 )) || break
    IFS=$SEP read -r -a ids <<< "$f"
    run_job "$index" "${names[$(( index - 1 ))]}" "$(job_seconds)" "${ids[@]}" "${deselect[@]}" "$@" &
    running=$(( running + 1 ))
    if (( running >= jobs )); then wait -n; running=$(( running - 1 )); fi
done
wait
summary
