#!/usr/bin/env bash
# Throughput of the built-in target (`mcpload serve`): 2026-07-28 tools/call echo requests
# (no session needed), JSON answers, keep-alive, 64 connections, measured with wrk (Debian
# package `wrk`). Prints requests/s and its ratio to the 30 000/s floor the target must clear.
#
# Usage: benches/target_throughput.sh [SECONDS] [CONNECTIONS]
# Needs: wrk (apt-get install wrk), curl. Builds the release binary first (CARGO_TARGET_DIR
# is honoured; benches/common.sh). Loopback only; stops the server it started.
source "$(dirname "$0")/common.sh"

DURATION="${1:-10}"
CONNECTIONS="${2:-64}"
FLOOR=30000

command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl not found" >&2; exit 2; }

WORK="$(mktemp -d)"
trap 'stop_serve; rm -rf "$WORK"' EXIT

start_serve --max-connections 4096
STATS_URL="${url%/mcp}/stats"

BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello from wrk"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
HEADERS=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
         -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo')

# One request by hand first: the body must get a real echo answer, not an error.
ANSWER="$(curl -s "${HEADERS[@]}" --data "$BODY" "$url")"
[[ "$ANSWER" == *'"text":"hello from wrk"'* ]] || { echo "unexpected answer: $ANSWER" >&2; exit 1; }

cat >"$WORK/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
LUA

echo "wrk: ${DURATION}s, ${CONNECTIONS} connections, 1 thread, against $url"
wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$WORK/post.lua" "$url" | tee "$WORK/wrk.out"

if grep -q "Non-2xx" "$WORK/wrk.out"; then
    echo "FAIL: some answers were not 2xx" >&2
    exit 1
fi
RPS="$(awk '/^Requests\/sec:/ {print $2}' "$WORK/wrk.out")"
echo "server counters: $(curl -s "$STATS_URL" | grep -o '"answers_sent":[0-9]*,"errors_sent":[0-9]*')"
awk -v rps="$RPS" -v floor="$FLOOR" 'BEGIN {
    printf "echo calls/s: %.0f  (%.2fx the %d/s floor)\n", rps, rps / floor, floor
    exit (rps >= floor) ? 0 : 1
}'
