# Sourced by the scripts in benches/: build the release binary once, start `mcpload serve`
# on loopback, stop it on exit; oha and its call; compare two measurements in rounds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mcpload="${CARGO_TARGET_DIR:-$root/target}/release/mcpload"
(cd "$root" && cargo build --release --quiet)
serve_pid=""
start_serve() {
    local out
    out="$(mktemp)"
    "$mcpload" serve "$@" >"$out" 2>/dev/null &
    serve_pid=$!
    for _ in $(seq 100); do
        [[ -s "$out" ]] && break
        sleep 0.05
    done
    url="$(head -1 "$out" | sed -n 's/^listening on //p')"
    rm -f "$out"
    [[ -n "$url" ]] || { echo "mcpload serve $* did not start" >&2; exit 1; }
}
stop_serve() {
    [[ -n "$serve_pid" ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
}
trap stop_serve EXIT
# oha, the peer the scripts compare with: on the PATH, or installed into benches/.tools on
# first use (`cargo install oha`). Sets $oha.
need_oha() {
    oha="$(command -v oha || true)"
    if [[ -z "$oha" ]]; then
        oha="$root/benches/.tools/bin/oha"
        [[ -x "$oha" ]] || cargo install oha --locked --quiet --root "$root/benches/.tools"
    fi
}
# The echo call as oha sends it, the same body and 2026-07-28 headers mcpload sends:
# `"$oha" ... "${oha_call[@]}" "$url"`.
oha_call=(-m POST -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"oha","version":"1"}}}}'
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo')
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# $rounds rounds of two measurements A and B (functions that print req/s), the order
# alternating (A first in odd rounds) so a drift in the machine's background load hits both
# alike. Prints each round with its ratio B/A, then the medians, the ratio of the medians and
# the median of the rounds' ratios.
alternate_rounds() { # NAME_A FUNCTION_A NAME_B FUNCTION_B
    local round a b r as=() bs=() ratios=()
    for round in $(seq "$rounds"); do
        if (( round % 2 )); then a="$("$2")"; b="$("$4")"; else b="$("$4")"; a="$("$2")"; fi
        r="$(python3 -c "print(round($b/$a, 3))")"
        echo "round $round: $1 $a req/s, $3 $b req/s, $3/$1 $r"
        as+=("$a"); bs+=("$b"); ratios+=("$r")
    done
    local m_a m_b
    m_a="$(printf '%s\n' "${as[@]}" | median)"
    m_b="$(printf '%s\n' "${bs[@]}" | median)"
    echo "median: $1 $m_a req/s, $3 $m_b req/s, ratio of medians $(python3 -c "print(round($m_b/$m_a, 3))"), median of round ratios $(printf '%s\n' "${ratios[@]}" | median)"
}
