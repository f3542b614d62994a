#!/usr/bin/env bash
# Throughput of two mcpload builds against the same target: OLD (required) and NEW (default:
# this tree's release build), each running the vs_oha load (the built-in target, echo, JSON
# answers, HTTP/1.1 keep-alive, 64 concurrent, 2026-07-28) for SECS seconds (default 10).
# ROUNDS rounds (default 10), the order alternating; prints each round, the medians and the
# median of the rounds' new/old ratios. The target is this tree's `mcpload serve`, started once.
#   OLD=/path/to/old/mcpload [NEW=/path/to/new/mcpload] benches/vs_previous.sh
source "$(dirname "$0")/common.sh"
old="${OLD:?set OLD to the previous mcpload binary}"
new="${NEW:-$mcpload}"
secs="${SECS:-10}"
rounds="${ROUNDS:-10}"
clients="${CLIENTS:-64}"
start_serve
throughput() {
    local out
    out="$(mktemp -d)"
    "$1" run -q --url "$url" --protocol 2026-07-28 -c "$clients" -d "${secs}s" --warmup 1s \
        --tool echo --args '{"message":"hi"}' --out "$out/run" >/dev/null
    python3 -c "import csv; print(next(csv.DictReader(open('$out/run/steps.csv')))['throughput_rps'])"
    rm -rf "$out"
}
olds=(); news=(); ratios=()
for round in $(seq "$rounds"); do
    # The order alternates, so a drift in the machine's background load hits both alike.
    if (( round % 2 )); then o="$(throughput "$old")"; n="$(throughput "$new")"
    else n="$(throughput "$new")"; o="$(throughput "$old")"; fi
    r="$(python3 -c "print(round($n/$o, 3))")"
    echo "round $round: old $o req/s, new $n req/s, new/old $r"
    olds+=("$o"); news+=("$n"); ratios+=("$r")
done
m_old="$(printf '%s\n' "${olds[@]}" | median)"
m_new="$(printf '%s\n' "${news[@]}" | median)"
echo "median: old $m_old req/s, new $m_new req/s, ratio of medians $(python3 -c "print(round($m_new/$m_old, 3))"), median new/old $(printf '%s\n' "${ratios[@]}" | median)"
