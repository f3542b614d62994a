#!/usr/bin/env bash
# Throughput of mcpload against oha on the same target and body: the built-in target
# (`mcpload serve`, echo, JSON answers, HTTP/1.1 keep-alive), 64 concurrent, 2026-07-28
# headers. ROUNDS rounds (default 5) of SECS seconds (default 10), the order alternating;
# prints each round, the medians, their ratio and the median of the rounds' ratios.
# Needs oha (installed into benches/.tools on first use: `cargo install oha`).
source "$(dirname "$0")/common.sh"
oha="$(command -v oha || true)"
if [[ -z "$oha" ]]; then
    oha="$root/benches/.tools/bin/oha"
    [[ -x "$oha" ]] || cargo install oha --locked --quiet --root "$root/benches/.tools"
fi
secs="${SECS:-10}"
start_serve
body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"oha","version":"1"}}}}'
rounds="${ROUNDS:-5}"
run_oha() {
    "$oha" -z "${secs}s" -c 64 --no-tui -m POST -d "$body" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' \
        "$url" | awk '/Requests\/sec/ {print $2}'
}
run_ours() { echo_throughput "$mcpload"; }
alternate_rounds oha run_oha mcpload run_ours
