#!/usr/bin/env bash
# Memory of a scenario run with many virtual users (issue #12): USERS users (default 10 000),
# closed loop, each running the built-in target's job workflow back to back for SECS seconds
# (default 300), against this build's `mcpload serve` started as a separate process on
# 127.0.0.1:
#   start   tools/call job_start (10 items), capture job_id
#   wait    poll job_status with {{var.job_id}} until the job is finished, at the server's
#           pollInterval (1 s), capture state
#   report  tools/call job_report with {{var.job_id}}
# A job takes 10 items x 200..250 ms (a seeded jitter that spreads the users apart), so an
# iteration is about 3 s and 5 to 6 requests (start, three polls a second apart, report):
# about 3 200 iterations and 18 000 requests a second at 10 000 users, a fifth of what the
# target serves, so the figures are mcpload's own rather than a saturated target's queue.
# Every user waits most of its time (a poll interval), holding its iteration's variables and
# its place in the timer.
#   benches/scenario_memory.sh                 # 10 000 users, 5 minutes
#   SECS=60 USERS=2000 benches/scenario_memory.sh
# Sockets: the run opens a connection per request in flight, at most min(USERS, 4096) (the
# pool's cap, src/run/mod.rs), and the target must accept them all (--max-connections); its
# idle keep-alive connections are closed after 30 s, so some reopen during the run. mcpload
# run and serve raise their open-files limit to the hard limit (`ulimit -Hn`); the script
# warns when that is below what the pool needs (a connect past the limit fails with EMFILE).
# Once a second it samples the load generator's process (not the target's) into OUT (default
# benches/.scenario_memory.csv): RSS, open descriptors, TCP sockets, CPU time (as soak.sh).
# Prints the peak RSS (VmHWM), RSS at 1 minute (or a fifth of the run, if shorter) and at the
# step's end, and a least-squares line fitted between the two; RSS is flat when the
# growth from the first mark to the end is within 10 % and the fitted growth is under
# soak.sh's limit (max(5 % of the mean, 6 MiB)). Then the step's requests, iterations,
# errors, and mcpload's CPU. Exits 1 when RSS trends up or the run fails; a run still alive
# 120 s after its end is killed.
source "$(dirname "$0")/common.sh"
secs="${SECS:-300}"
users="${USERS:-10000}"
out="${OUT:-$root/benches/.scenario_memory.csv}"
hard="$(ulimit -Hn)"
pool=$(( users < 4096 ? users : 4096 ))
# The pool's sockets plus the run's own descriptors (epoll, timers, files).
if [[ "$hard" != unlimited ]] && (( hard < pool + 64 )); then
    echo "the hard open-files limit is $hard, below the $pool connections the pool may open:" \
        "expect transport errors (EMFILE); raise it (ulimit -Hn, as root)" >&2
fi
start_serve --job-item-ms 200 --job-item-jitter-ms 50 --job-poll-interval-ms 1000 \
    --max-jobs 100000 --seed 1 --max-connections "$((users + 1024))"
run="$(mktemp -d)"
cat >"$run/profile.toml" <<TOML
name = "scenario-memory"

[target]
url = "$url"

[load]
model = "closed"
timeout = "10s"

[[scenario]]
name = "job"

  [[scenario.step]]
  name = "start"
  call = { method = "tools/call", tool = "job_start", args = { items = 10, request_key = "{{uuid}}" } }
  capture = { job_id = "result.structuredContent.job_id" }

  [[scenario.step]]
  name = "wait"
  poll = { method = "tools/call", tool = "job_status", args = { job_id = "{{var.job_id}}" } }
  until = "result.structuredContent.state in ['succeeded', 'partial', 'failed']"
  server_interval = true
  max_polls = 20
  max_time = "20s"
  capture = { state = "result.structuredContent.state" }

  [[scenario.step]]
  name = "report"
  call = { method = "tools/call", tool = "job_report", args = { job_id = "{{var.job_id}}" } }
TOML
echo "$users users, ${secs}s, target $url, open-files limit: soft $(ulimit -Sn), hard $hard;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg); samples in $out"
PYTHONPATH="$root/benches" python3 - "$secs" "$out" "$run" \
    "$mcpload" run -q "$run/profile.toml" -c "$users" -d "${secs}s" --warmup 0s \
    --out "$run/run" <<'PY' && rm -rf "$run" || { echo "kept $run"; exit 1; }
import csv, sys
from process_trend import rss_flat, watch
secs, csv_path, run_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rows, peak = watch(sys.argv[4:], secs, csv_path, f"{run_dir}/stdout.log")
step = next(csv.DictReader(open(f"{run_dir}/run/steps.csv")))
print(f"requests {step['requests']} ({float(step['throughput_rps']):.0f}/s), errors "
      f"{step['errors']}, timeouts {step['timeouts']}, transport errors "
      f"{step['transport_errors']}, p99 {step['p99_ms']} ms, in flight at most "
      f"{step['in_flight_max']}")
if step["transport_error"]:
    print(f"first transport error: {step['transport_error']}")
print("iterations: " + ", ".join(f"{k} {v}" for k, v in step.items() if k.startswith("iter")))
flat = rss_flat(rows, secs, peak)
cpu_run = rows[-1][4]
print(f"CPU {cpu_run:.1f} s over the run ({100 * cpu_run / rows[-1][0]:.0f} % of a core), "
      f"{1e6 * cpu_run / max(1, int(step['requests'])):.1f} us per request")
print(f"verdict: RSS {'FLAT' if flat else 'NOT FLAT'}")
sys.exit(0 if flat else 1)
PY
