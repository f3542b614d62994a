#!/usr/bin/env bash
# Throughput of mcpload against oha on the same target and body: the built-in target
# (`mcpload serve`, echo, JSON answers, HTTP/1.1 keep-alive), 64 concurrent, 2026-07-28
# headers. Three alternating rounds of 10 s; prints the medians and their ratio.
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
ours=(); theirs=()
for round in 1 2 3; do
    t="$("$oha" -z "${secs}s" -c 64 --no-tui -m POST -d "$body" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' \
        "$url" | awk '/Requests\/sec/ {print $2}')"
    out="$(mktemp -d)"
    "$mcpload" run -q --url "$url" --protocol 2026-07-28 -c 64 -d "${secs}s" --warmup 1s \
        --tool echo --args '{"message":"hi"}' --out "$out/run" >/dev/null
    o="$(python3 -c "import csv,sys; r=list(csv.DictReader(open('$out/run/steps.csv'))); print(r[0]['throughput_rps'])")"
    rm -rf "$out"
    echo "round $round: oha $t req/s, mcpload $o req/s"
    theirs+=("$t"); ours+=("$o")
done
m_oha="$(printf '%s\n' "${theirs[@]}" | median)"
m_ours="$(printf '%s\n' "${ours[@]}" | median)"
echo "median: oha $m_oha req/s, mcpload $m_ours req/s, ratio mcpload/oha $(python3 -c "print(round($m_ours/$m_oha, 3))")"
