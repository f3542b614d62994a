# Sourced by the scripts in benches/: build the release binary once, start `mcpload serve`
# on loopback, stop it on exit.
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
    url="$(head -1 "$out" | sed 's/^listening on //')"
    rm -f "$out"
}
stop_serve() {
    [[ -n "$serve_pid" ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
}
trap stop_serve EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
