#!/usr/bin/env bash
# What live metrics cost the load: the vs_oha load (the built-in target, echo, 64 concurrent,
# 2026-07-28) for SECS seconds (default 10), with `--prometheus-remote-write` to a real
# Prometheus (tests/prometheus/setup.sh installs it; started here on a free loopback port
# with its receiver and native histograms on) and without, ROUNDS rounds (default 10), the
# order alternating. Prints each round, the medians and the median of the rounds' on/off
# throughput ratios (the goal: at least 0.98), and what came of the pushes.
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

# Prints the throughput (req/s, steps.csv) of one run; with $1, pushing to Prometheus.
run_once() {
    local out
    out="$(mktemp -d)"
    "$mcpload" run -q --url "$url" --protocol 2026-07-28 -c 64 -d "${secs}s" --warmup 1s \
        --tool echo --args '{"message":"hi"}' --out "$out/run" ${1:+--prometheus-remote-write "$1"} >/dev/null
    if [[ -n "${1:-}" ]]; then
        python3 -c "
import json, sys
p = json.load(open('$out/run/summary.json'))['export']['prometheus_remote_write']
print('  pushes %(pushes)s sent %(sent)s retries %(retries)s dropped %(dropped)s failed %(failed)s' % p, file=sys.stderr)"
    fi
    python3 -c "import csv; print(next(csv.DictReader(open('$out/run/steps.csv')))['throughput_rps'])"
    rm -rf "$out"
}
off() { run_once ""; }
on() { run_once "$write_url"; }
alternate_rounds off off on on
