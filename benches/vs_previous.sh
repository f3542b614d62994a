#!/usr/bin/env bash
# Throughput of two mcpload builds against the same target: OLD (required) and NEW (default:
# this tree's release build), each running the vs_oha load (the built-in target, echo, JSON
# answers, HTTP/1.1 keep-alive, 64 concurrent, 2026-07-28) for SECS seconds (default 10).
# ROUNDS rounds (default 10), the order alternating; prints each round, the medians and the
# median of the rounds' new/old ratios, of throughput and of CPU time (user + system) per
# request, the steadier figure on a busy machine. The target is this tree's `mcpload serve`,
# started once.
# OLD may be replaced by REV, a git revision built once into benches/.tools/rev-<sha>.
# WATCH=1: the new build watches the target as a process (`--server-pid`), to measure what
# sampling the server costs (OLD=NEW=this build then compares the same build with and
# without it).
#   OLD=/path/to/old/mcpload [NEW=/path/to/new/mcpload] benches/vs_previous.sh
#   REV=f33e989 benches/vs_previous.sh
#   OLD=target/release/mcpload WATCH=1 benches/vs_previous.sh
source "$(dirname "$0")/common.sh"
if [[ -z "${OLD:-}" && -n "${REV:-}" ]]; then
    rev="$(cd "$root" && git rev-parse --short "$REV")"
    tree="$root/benches/.tools/rev-$rev"
    if [[ ! -x "$tree/target/release/mcpload" ]]; then
        rm -rf "$tree"
        mkdir -p "$tree"
        (cd "$root" && git archive "$rev") | tar -x -C "$tree"
        (cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo build --release --quiet --locked)
    fi
    OLD="$tree/target/release/mcpload"
fi
old="${OLD:?set OLD to the previous mcpload binary, or REV to a git revision}"
new="${NEW:-$mcpload}"
secs="${SECS:-10}"
rounds="${ROUNDS:-10}"
clients="${CLIENTS:-64}"
start_serve
# Prints "<throughput req/s> <CPU microseconds per request>" of one run of binary $1, with
# the options $2 (the new build's: --server-pid under WATCH=1).
measure() {
    local out cpu
    out="$(mktemp -d)"
    TIMEFORMAT='%U %S'
    cpu="$( { time "$1" run -q --url "$url" --protocol 2026-07-28 -c "$clients" -d "${secs}s" \
        --warmup 1s --tool echo --args '{"message":"hi"}' --out "$out/run" ${2:-} >/dev/null 2>&1; } 2>&1 )"
    python3 -c "
import csv
row = next(csv.DictReader(open('$out/run/steps.csv')))
user, system = map(float, '$cpu'.split())
rps = float(row['throughput_rps'])
# The CPU of the whole process (warm-up included) over the requests of the same time.
print(rps, round((user + system) * 1e6 / (rps * ($secs + 1)), 2))"
    rm -rf "$out"
}
new_args=""
[[ -n "${WATCH:-}" ]] && new_args="--server-pid $serve_pid"
olds=(); news=(); ratios=(); cpu_ratios=()
for round in $(seq "$rounds"); do
    # The order alternates, so a drift in the machine's background load hits both alike.
    if (( round % 2 )); then o=($(measure "$old")); n=($(measure "$new" "$new_args"))
    else n=($(measure "$new" "$new_args")); o=($(measure "$old")); fi
    r="$(python3 -c "print(round(${n[0]}/${o[0]}, 3))")"
    c="$(python3 -c "print(round(${n[1]}/${o[1]}, 3))")"
    echo "round $round: old ${o[0]} req/s ${o[1]} us/req, new ${n[0]} req/s ${n[1]} us/req, new/old throughput $r, CPU per request $c"
    olds+=("${o[0]}"); news+=("${n[0]}"); ratios+=("$r"); cpu_ratios+=("$c")
done
m_old="$(printf '%s\n' "${olds[@]}" | median)"
m_new="$(printf '%s\n' "${news[@]}" | median)"
echo "median: old $m_old req/s, new $m_new req/s, ratio of medians $(python3 -c "print(round($m_new/$m_old, 3))"), median new/old $(printf '%s\n' "${ratios[@]}" | median), median new/old CPU per request $(printf '%s\n' "${cpu_ratios[@]}" | median)"
