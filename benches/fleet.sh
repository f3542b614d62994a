#!/usr/bin/env bash
# A process per session (issue #26): how many copies of a stdio server fit on this machine,
# and churn without a leak in mcpload itself.
#   bash benches/fleet.sh sweep     # the everything server's stdio fleet, 8 users doubling
#   BUDGET=1GiB bash benches/fleet.sh sweep   # the same within a fleet memory budget
#   bash benches/fleet.sh churn     # SESSIONS (default 10000) sessions of `mcpload serve --stdio`
# sweep: `--process-per-user -c LEVELS` (default 8..512 x2), STEP seconds each (default 10),
#   `echo` calls; prints each step (children, RSS of the fleet and per child, CPU, start-up,
#   verdict) and summary.json's fleet verdict: the largest healthy fleet and what ran out.
# churn: one call a session (`--session-calls 1`), 8 users, until SESSIONS children were
#   started; samples mcpload's own descriptors and its children every 0.2 s, prints them at
#   the start and at the end of the load, and the children left after the run (a marker in
#   their environment finds them).
source "$(dirname "$0")/common.sh"
what="${1:-sweep}"
run="$(mktemp -d)"
case "$what" in
sweep)
    everything="$root/tests/interop_servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    [[ -f "$everything" ]] || bash "$root/tests/interop_servers/setup.sh" >/dev/null
    budget=()
    [[ -n "${BUDGET:-}" ]] && budget=(--fleet-memory-budget "$BUDGET")
    "$mcpload" run -q --stdio "node $everything stdio" --process-per-user "${budget[@]}" \
        -c "${LEVELS:-8..512 x2}" -d "${STEP:-10}s" --warmup 0s --timeout 30s \
        --tool echo --args '{"message":"fleet"}' --out "$run/run" >/dev/null 2>"$run/stderr" || true
    python3 - "$run/run" <<'PY'
import csv, json, sys
folder = sys.argv[1]
s = json.load(open(f"{folder}/summary.json"))
mib = lambda b: f"{int(b) / 2**20:.0f} MiB" if b not in ("", None) else "-"
print(f"{'users':>6} {'fleet RSS':>10} {'per child':>10} {'CPU %':>6} {'spawn p50':>9} "
      f"{'connect p50/p99 ms':>19} {'req/s':>8} {'p99 ms':>8}  verdict")
for r in csv.DictReader(open(f"{folder}/steps.csv")):
    n = int(r["concurrency"])
    per = int(r["server_rss_max_bytes"]) // n if r["server_rss_max_bytes"] else ""
    print(f"{n:>6} {mib(r['server_rss_max_bytes']):>10} {mib(per):>10} "
          f"{r['server_cpu_max_pct'] or '-':>6} {r['spawn_p50_ms'] or '-':>9} "
          f"{(r['connect_p50_ms'] or '-') + ' / ' + (r['connect_p99_ms'] or '-'):>19} "
          f"{float(r['throughput_rps']):>8.1f} {r['p99_ms']:>8}  {r['verdict']}"
          + (f" ({r['transport_error'][:90]})" if r["transport_error"] else ""))
print("fleet:", s["fleet"]["reason"])
p = s["processes"]
print(f"children started {p['started']}, start failures {p['start_failures']}, exits {p['exits_total']}, "
      f"budget {mib(p.get('memory_budget_bytes'))}, refused for it {p.get('budget_refusals', 0)}")
PY
    ;;
churn)
    sessions="${SESSIONS:-10000}"
    mark="fleet-churn-$$"
    "$mcpload" run -q --stdio "$mcpload serve --stdio" --process-per-user --session-calls 1 \
        --child-env "MCPLOAD_FLEET_MARK=$mark" --protocol 2025-11-25 -c 8 \
        -d "${DURATION:-$((sessions / 250 + 5))}s" --warmup 0s --cooldown 3s \
        --tool echo --args '{"message":"churn"}' --out "$run/run" >/dev/null 2>"$run/stderr" &
    pid=$!
    : >"$run/samples"
    while kill -0 "$pid" 2>/dev/null; do
        fds="$( (ls "/proc/$pid/fd" 2>/dev/null || true) | wc -l)"
        kids="$( (grep -l "^PPid:[[:space:]]*$pid\$" /proc/[0-9]*/status 2>/dev/null || true) | wc -l)"
        echo "$fds $kids" >>"$run/samples"
        sleep 0.2
    done
    wait "$pid" || true
    left="$( (grep -l "MCPLOAD_FLEET_MARK=$mark" /proc/[0-9]*/environ 2>/dev/null || true) | wc -l)"
    python3 - "$run/run" "$run/samples" "$left" <<'PY'
import json, sys
folder, samples, left = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = json.load(open(f"{folder}/summary.json"))
rows = [tuple(map(int, l.split())) for l in open(samples) if l.strip()]
rows = [r for r in rows if r[0] > 0]
p, step = s["processes"], s["steps"][0]
print(f"children started {p['started']} in {step['duration_s']:.0f} s "
      f"({p['started'] / step['duration_s']:.0f}/s), start failures {p['start_failures']}, "
      f"exits {p['exits_total']}; calls {step['requests']}, ok {step['ok']}")
print(f"spawn p50 {step['spawn_p50_ms']} ms p99 {step['spawn_p99_ms']} ms; "
      f"connect p50 {step['connect_p50_ms']} ms p99 {step['connect_p99_ms']} ms")
early, late = rows[min(5, len(rows) - 1)], rows[-1]
print(f"mcpload's descriptors: {early[0]} at the start, {late[0]} in the cool-down "
      f"(max {max(r[0] for r in rows)}); its children: {early[1]} at the start, {late[1]} in the "
      f"cool-down; children left after the run: {left}")
PY
    ;;
*) echo "usage: bash benches/fleet.sh sweep|churn" >&2; exit 2 ;;
esac
rm -rf "$run"
