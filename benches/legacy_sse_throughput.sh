#!/usr/bin/env bash
# Throughput of mcpload against the built-in target over the legacy HTTP+SSE transport
# (2024-11-05: GET /sse, POSTs answered 202, answers on the stream) beside Streamable HTTP,
# the same target process (`serve --legacy-sse` serves both), the same revision (2025-11-25,
# agreed by initialize over both), 64 clients calling echo. ROUNDS rounds (default 5) of
# SECS seconds (default 5), the order alternating; prints each round, the medians and the
# ratios (benches/common.sh).
#
# Usage: benches/legacy_sse_throughput.sh [SECS] [ROUNDS]
# Builds the release binary first (CARGO_TARGET_DIR is honoured). Loopback only; stops the
# server it started.
source "$(dirname "$0")/common.sh"

secs="${1:-5}"
rounds="${2:-5}"

start_serve --legacy-sse --max-connections 4096
streamable_url="$url"
legacy_url="${url%/mcp}/sse"

# Prints the throughput (req/s, steps.csv) of one run at URL with the extra flags.
throughput() { # URL FLAGS...
    local out target="$1"
    shift
    out="$(mktemp -d)"
    "$mcpload" run -q --url "$target" "$@" --protocol 2025-11-25 -c 64 -d "${secs}s" \
        --warmup 1s --tool echo --args '{"message":"hi"}' --out "$out/run" >/dev/null
    python3 -c "import csv; print(next(csv.DictReader(open('$out/run/steps.csv')))['throughput_rps'])"
    rm -rf "$out"
}
streamable() { throughput "$streamable_url" --transport streamable-http; }
legacy() { throughput "$legacy_url" --transport sse; }

echo "64 clients, ${secs}s per run, $rounds rounds, against $streamable_url and $legacy_url"
alternate_rounds streamable-http streamable sse legacy
