#!/usr/bin/env bash
# Throughput of mcpload against oha on the same target and body: the built-in target
# (`mcpload serve`, echo, JSON answers, HTTP/1.1 keep-alive), 64 concurrent, 2026-07-28
# headers. ROUNDS rounds (default 5) of SECS seconds (default 10), the order alternating;
# prints each round, the medians, their ratio and the median of the rounds' ratios.
# Needs oha (installed into benches/.tools on first use: `cargo install oha`).
source "$(dirname "$0")/common.sh"
need_oha
secs="${SECS:-10}"
start_serve
rounds="${ROUNDS:-5}"
run_oha() {
    "$oha" -z "${secs}s" -c 64 --no-tui "${oha_call[@]}" "$url" | awk '/Requests\/sec/ {print $2}'
}
run_ours() { echo_throughput "$mcpload"; }
alternate_rounds oha run_oha mcpload run_ours
