#!/usr/bin/env bash
# What live metrics cost the load: the vs_oha load (the built-in target, echo, 64 concurrent,
# 2026-07-28) for SECS seconds (default 10), with `--prometheus-remote-write` to a real
# Prometheus (tests/prometheus/setup.sh installs it; started here on a free loopback port
# with its receiver and native histograms on) and without, ROUNDS rounds (default 10), the
# order alternating. Prints each round, the medians and the median of the rounds' on/off
# ratios of throughput (the goal: at least 0.98) and of CPU time per request (the steadier
# figure when other work shares the machine), and what came of each run's pushes.
#   benches/remote_write.sh
#   ROUNDS=4 SECS=5 benches/remote_write.sh
source "$(dirname "$0")/common.sh"
secs="${SECS:-10}"
rounds="${ROUNDS:-10}"
bash "$root/tests/prometheus/setup.sh"
start_serve
prom_dir="$(mktemp -d)"
prom_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
echo "scrape_configs: []" > "$prom_dir/prometheus.yml"
prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/data" \
    --web.listen-address="127.0.0.1:$prom_port" --web.enable-remote-write-receiver \
    --enable-feature=native-histograms >"$prom_dir/log" 2>&1 &
prom_pid=$!
trap 'kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; rm -rf "$prom_dir"; stop_serve' EXIT
for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$prom_port/-/ready" >/dev/null && break
    sleep 0.1
done
write_url="http://127.0.0.1:$prom_port/api/v1/write"

# Prints "<throughput req/s> <CPU microseconds per request>" of one run (the process's user
# + system time over the requests of its run, warm-up included); with $1, pushing there.
run_once() {
    local out cpu
    out="$(mktemp -d)"
    TIMEFORMAT='%U %S'
    cpu="$( { time "$mcpload" run -q --url "$url" --protocol 2026-07-28 -c 64 -d "${secs}s" \
        --warmup 1s --tool echo --args '{"message":"hi"}' --out "$out/run" \
        ${1:+--prometheus-remote-write "$1"} >/dev/null 2>&1; } 2>&1 )"
    if [[ -n "${1:-}" ]]; then
        python3 -c "
import json, sys
p = json.load(open('$out/run/summary.json'))['export']['prometheus_remote_write']
print('  pushes %(pushes)s sent %(sent)s retries %(retries)s dropped %(dropped)s failed %(failed)s' % p, file=sys.stderr)"
    fi
    python3 -c "
import csv
row = next(csv.DictReader(open('$out/run/steps.csv')))
user, system = map(float, '$cpu'.split())
rps = float(row['throughput_rps'])
print(rps, round((user + system) * 1e6 / (rps * ($secs + 1)), 2))"
    rm -rf "$out"
}
offs=(); ons=(); ratios=(); cpu_ratios=()
for round in $(seq "$rounds"); do
    # The order alternates, so a drift in the machine's background load hits both alike.
    if (( round % 2 )); then o=($(run_once "")); n=($(run_once "$write_url"))
    else n=($(run_once "$write_url")); o=($(run_once "")); fi
    r="$(python3 -c "print(round(${n[0]}/${o[0]}, 3))")"
    c="$(python3 -c "print(round(${n[1]}/${o[1]}, 3))")"
    echo "round $round: off ${o[0]} req/s ${o[1]} us/req, on ${n[0]} req/s ${n[1]} us/req, on/off throughput $r, CPU per request $c"
    offs+=("${o[0]}"); ons+=("${n[0]}"); ratios+=("$r"); cpu_ratios+=("$c")
done
m_off="$(printf '%s\n' "${offs[@]}" | median)"
m_on="$(printf '%s\n' "${ons[@]}" | median)"
echo "median: off $m_off req/s, on $m_on req/s, ratio of medians $(python3 -c "print(round($m_on/$m_off, 3))"), median on/off throughput $(printf '%s\n' "${ratios[@]}" | median), median on/off CPU per request $(printf '%s\n' "${cpu_ratios[@]}" | median)"
