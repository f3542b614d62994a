#!/usr/bin/env bash
# Memory of 10 000 live MCP tasks (issue #13): TASKS virtual users (default 10 000), closed
# loop, each calling `slow_task` as a task (the 2026-07-28 tasks extension) back to back for
# SECS seconds (default 300), against this build's `mcpload serve` started as a separate
# process on 127.0.0.1. A task works 50 to 70 s (`{{rand:50000..70000}}` ms, so the users
# drift apart after their first task) and the target advises polling every POLL_MS (default
# 5 000) ms, which mcpload follows: every user holds one live task nearly all the time, polled
# about 12 times before its result comes inline with the terminal `tasks/get`. That is about
# 2 000 polls and 170 new tasks a second at 10 000 tasks, far below what the target serves,
# so the figures are mcpload's own.
#   benches/task_memory.sh                     # 10 000 tasks, 5 minutes
#   SECS=60 TASKS=2000 benches/task_memory.sh
# Sockets: a task waiting between polls holds no connection, so the pool (min(TASKS, 4 096),
# src/run/mod.rs) is plenty; the target must still accept them all (--max-connections).
# Once a second it samples the load generator's process (not the target's) into OUT (default
# benches/.task_memory.csv): RSS, open descriptors, TCP sockets, CPU time (as soak.sh).
# Prints the peak RSS (VmHWM), RSS at 1 minute (or a fifth of the run) and at the step's end
# with a least-squares line between them, flat as in scenario_memory.sh but for a fall (the
# pool's sockets, each with its read buffer, close as the users drift apart), and a fit of
# RSS against the sockets and time that judges what the tasks hold apart from them; the
# step's tasks
# (created, completed, most live at once, polls); and mcpload's CPU per poll: its CPU time
# over the step divided by the polls sent (creations, the 10 000 at the start included, are
# charged to the polls, so it bounds the cost of a poll from above), and per request; then the
# same from the RSS mark to the step's end, the start's burst behind. Exits 1
# when RSS trends up, the run fails, or the target never held 95 % of TASKS tasks working at
# once (its /stats `tasks.working_max`).
source "$(dirname "$0")/common.sh"
secs="${SECS:-300}"
tasks="${TASKS:-10000}"
poll_ms="${POLL_MS:-5000}"
out="${OUT:-$root/benches/.task_memory.csv}"
hard="$(ulimit -Hn)"
pool=$(( tasks < 4096 ? tasks : 4096 ))
if [[ "$hard" != unlimited ]] && (( hard < pool + 64 )); then
    echo "the hard open-files limit is $hard, below the $pool connections the pool may open:" \
        "the pool shrinks to fit (a line on stderr says so)" >&2
fi
start_serve --task-poll-interval-ms "$poll_ms" --max-tasks "$((2 * tasks))" \
    --max-connections "$((tasks + 1024))"
run="$(mktemp -d)"
cat >"$run/profile.toml" <<TOML
name = "task-memory"

[target]
url = "$url"
protocol = "2026-07-28"

[load]
model = "closed"
timeout = "10s"
graceful_stop = "1s"   # the tasks live at the step's end are cut off and cancelled

[[mix]]
method = "tools/call"
tool = "slow_task"
args = { ms = "{{rand:50000..70000}}" }
task = true
task_timeout = "120s"
TOML
echo "$tasks tasks, ${secs}s, pollInterval ${poll_ms} ms, target $url, open-files limit:" \
    "soft $(ulimit -Sn), hard $hard; load average $(cut -d' ' -f1-3 /proc/loadavg);" \
    "samples in $out"
PYTHONPATH="$root/benches" python3 - "$secs" "$out" "$run" "$tasks" "$url" \
    "$mcpload" run -q "$run/profile.toml" -c "$tasks" -d "${secs}s" --warmup 0s \
    --out "$run/run" <<'PY' && rm -rf "$run" || { echo "kept $run"; exit 1; }
import csv, json, sys, urllib.parse, urllib.request
from process_trend import fit2, rss_flat, rss_limit, verdict, watch
secs, csv_path, run_dir, tasks, url = sys.argv[1:6]
secs, tasks = int(secs), int(tasks)
rows, peak = watch(sys.argv[6:], secs, csv_path, f"{run_dir}/stdout.log")
# The target's ground truth: how many tasks it held working at once, the polls it answered.
truth = json.load(urllib.request.urlopen(urllib.parse.urljoin(url, "/stats")))["tasks"]
step = next(csv.DictReader(open(f"{run_dir}/run/steps.csv")))
n = lambda col: int(float(step[col] or 0))
print(f"requests {n('requests')} ({float(step['throughput_rps']):.0f}/s), errors "
      f"{step['errors']}, timeouts {step['timeouts']}, transport errors "
      f"{step['transport_errors']}, in flight at most {step['in_flight_max']}")
if step["transport_error"]:
    print(f"first transport error: {step['transport_error']}")
print(f"tasks created {n('tasks_created')}, completed {n('tasks_completed')}, unfinished "
      f"{n('tasks_unfinished')}, anomalies {n('task_anomalies')}; live at most "
      f"{n('tasks_live_max')}; polls {n('task_polls')} ({n('task_polls') / secs:.0f}/s), "
      f"{step['polls_per_task_p50']} per task (p50); calls answered {n('calls_answered')}, "
      f"failed {n('calls_failed')}; call latency p50 {step['p50_ms']} ms, p99 {step['p99_ms']} ms")
print(f"target: {truth['created']} tasks created, at most {truth['working_max']} working at once, "
      f"{truth['polls']} polls answered")
# The pool's sockets come and go (the target closes those idle 30 s, and once the users
# have drifted apart few are needed), each with its read buffer: a fall of RSS with them is
# no leak, so a fall passes. What the live tasks hold is judged apart from the sockets:
# RSS = a + b * sockets + c * t fitted over the same samples, c * span against the limit.
flat = rss_flat(rows, secs, peak, falls_ok=True)
during = [r for r in rows if r[0] <= secs]
steady = [r for r in during if r[0] >= min(60.0, secs / 5)]
(b, c), (se_b, se_c), mean = fit2([(r[3], r[0], r[1]) for r in steady])
span = steady[-1][0] - steady[0][0]
limit = rss_limit(mean)
net = verdict(c * span, se_c * span, limit)
print(f"RSS with the sockets held apart: {b:.2f} ± {2 * se_b:.2f} KiB per TCP socket; over "
      f"time {c * 60:+.1f} KiB/min, growth {c * span:+.0f} ± {2 * se_c * span:.0f} KiB, "
      f"limit {limit:.0f}: {net}")
flat = flat and net == "flat"
# CPU over the step: the last sample before the step's end (then comes the report).
cpu = during[-1][4]
polls = max(1, n("task_polls"))
print(f"CPU {cpu:.1f} s over the step ({100 * cpu / secs:.0f} % of a core): "
      f"{1e6 * cpu / polls:.1f} us per poll, {1e6 * cpu / max(1, n('requests')):.1f} us per "
      f"request")
# In the steady part (from the RSS mark on, the start's burst of creations and connects
# behind): CPU per request from timeseries.csv's requests a second, and per poll with the
# polls' share of the step's polls and creations (the cancels at its end left out).
first, last = steady[0], steady[-1]
sent = sum(int(r["requests"]) for r in csv.DictReader(open(f"{run_dir}/run/timeseries.csv"))
           if first[0] <= float(r["t_s"]) and float(r["t_s"]) + 1 <= last[0])
share = polls / (polls + n("tasks_created"))
window = last[4] - first[4]
print(f"steady, {first[0]:.0f}..{last[0]:.0f} s: CPU {window:.1f} s "
      f"({100 * window / (last[0] - first[0]):.1f} % of a core) for {sent} requests: "
      f"{1e6 * window / max(1, sent):.1f} us per request, about "
      f"{1e6 * window / max(1, sent * share):.1f} us per poll ({100 * share:.0f} % of them polls)")
live = truth["working_max"] >= 0.95 * tasks
print(f"verdict: RSS {'FLAT' if flat else 'NOT FLAT'}; live tasks "
      f"{'held' if live else 'NOT HELD'}")
sys.exit(0 if flat and live else 1)
PY
