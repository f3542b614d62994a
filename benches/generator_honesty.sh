#!/usr/bin/env bash
# Does `generator_bound` tell the truth (issue #24's honesty goal)? Two sets of runs, on a
# machine otherwise quiet:
# - a slow target, the built-in one at 20 ms a call (`serve --service-ms 20`), where the server
#   is the bottleneck: closed loops of 8 and 64 clients, open loops of 100 and 1,000 calls a
#   second, over HTTP and stdio. No step may be marked.
# - a starved generator: mcpload pinned (`taskset`) to the first allowed core beside a busy
#   loop pinned there too, the built-in target (as fast as it goes) on the second core: a
#   closed loop of 32 clients and an open loop of 4,000 calls a second, over HTTP and stdio.
#   Every step must be marked.
# Each run is SECS seconds (default 5) with no warm-up, ROUNDS rounds (default 3). Prints a row
# per run: what was run, whether the step was marked and why, and the figures the judgement
# reads (CPU, the worker thread's share of its core, schedule lag p99, loop delay p99, p50);
# then the count of runs that told the truth.
source "$(dirname "$0")/common.sh"
secs="${SECS:-5}"
rounds="${ROUNDS:-3}"
cpus="$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')"
read -r starved_core target_core _ <<<"$cpus"
[[ -n "${target_core:-}" ]] || { echo "needs two cores (has: $cpus)" >&2; exit 1; }
work="$(mktemp -d)"
spinner=""
cleanup() {
    [[ -n "$spinner" ]] && kill "$spinner" 2>/dev/null
    stop_serve
    rm -rf "$work"
}
trap cleanup EXIT
told=0
runs=0

# Runs `mcpload run ARGS` (prefixed by PIN, a command such as `taskset -c 0`, when set), then
# prints its row and counts whether the mark was EXPECTED (true/false).
judge() { # NAME EXPECTED ARGS...
    local name="$1" expected="$2"
    shift 2
    rm -rf "$work/run"
    ${pin:-} "$mcpload" run -q "$@" --tool echo -d "${secs}s" --warmup 0s --keep-going \
        --out "$work/run" >/dev/null
    local verdict
    verdict="$(python3 - "$work/run/steps.csv" "$name" "$expected" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
name, expected = sys.argv[2], sys.argv[3]
ok = all(r["generator_bound"] == expected for r in rows)
for r in rows:
    print(f"{name:34} {r['generator_bound']:>5} {r['generator_cpu_pct']:>6} "
          f"{r['generator_load_thread_pct']:>7} {r['schedule_lag_p99_ms'] or '-':>8} "
          f"{r['loop_delay_p99_ms']:>8} {r['p50_ms']:>8}  {r['generator_bound_reason']}")
print("TOLD" if ok else "WRONG")
PY
)"
    sed '$d' <<<"$verdict"
    runs=$((runs + 1))
    [[ "$(tail -1 <<<"$verdict")" == TOLD ]] && told=$((told + 1))
    return 0
}

# The four loads of the slow target, or the two of the starved generator, over HTTP and stdio.
slow_loads=("-c 8" "-c 64" "--rate 100" "--rate 1000")
starved_loads=("-c 32" "--rate 4000")
printf "%-34s %5s %6s %7s %8s %8s %8s  %s\n" run bound cpu% thread% "lag p99" "loop p99" "p50 ms" reason
for round in $(seq "$rounds"); do
    # The slow target: mcpload free to use every core.
    pin=""
    start_serve --service-ms 20
    for load in "${slow_loads[@]}"; do
        # shellcheck disable=SC2086 # a load is two words
        judge "slow http $load" false --url "$url" $load
    done
    stop_serve
    for load in "${slow_loads[@]}"; do
        # shellcheck disable=SC2086
        judge "slow stdio $load" false --stdio "$mcpload serve --stdio --service-ms 20" $load
    done
    # The starved generator: its core shared with a busy loop, the target on the other.
    taskset -c "$starved_core" sh -c 'while :; do :; done' &
    spinner=$!
    pin=""
    start_serve
    taskset -a -p -c "$target_core" "$serve_pid" >/dev/null
    pin="taskset -c $starved_core"
    for load in "${starved_loads[@]}"; do
        # shellcheck disable=SC2086
        judge "starved http $load" true --url "$url" $load
    done
    stop_serve
    serve_pid=""
    for load in "${starved_loads[@]}"; do
        # shellcheck disable=SC2086
        judge "starved stdio $load" true --stdio "taskset -c $target_core $mcpload serve --stdio" $load
    done
    kill "$spinner"
    wait "$spinner" 2>/dev/null || true
    spinner=""
done
echo "told the truth in $told of $runs runs"
