#!/usr/bin/env bash
# Throughput of this build against an earlier one, on the same target (this build's
# `mcpload serve`, echo, JSON answers), 64 concurrent, 2026-07-28 headers. ROUNDS rounds
# (default 10) of SECS seconds (default 5), the order alternating; prints each round, the
# medians, and the median of the rounds' new/old ratios. The earlier build is REV (a git
# revision, built once into benches/.tools/rev-<sha>) or OLD (a path to an mcpload binary).
#   REV=f33e989 bash benches/vs_previous.sh
source "$(dirname "$0")/common.sh"
if [[ -z "${OLD:-}" ]]; then
    rev="$(cd "$root" && git rev-parse --short "${REV:?set REV (a git revision) or OLD (a binary)}")"
    tree="$root/benches/.tools/rev-$rev"
    if [[ ! -x "$tree/target/release/mcpload" ]]; then
        rm -rf "$tree"
        mkdir -p "$tree"
        (cd "$root" && git archive "$rev") | tar -x -C "$tree"
        (cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo build --release --quiet --locked)
    fi
    OLD="$tree/target/release/mcpload"
fi
secs="${SECS:-5}"
rounds="${ROUNDS:-10}"
start_serve
run_one() { # binary
    local out
    out="$(mktemp -d)"
    "$1" run -q --url "$url" --protocol 2026-07-28 -c 64 -d "${secs}s" --warmup 1s \
        --tool echo --args '{"message":"hi"}' --out "$out/run" >/dev/null
    python3 -c "import csv; print(next(csv.DictReader(open('$out/run/steps.csv')))['throughput_rps'])"
    rm -rf "$out"
}
olds=(); news=(); ratios=()
for round in $(seq "$rounds"); do
    # The order alternates, so a drift in the machine's background load hits both alike.
    if (( round % 2 )); then o="$(run_one "$OLD")"; n="$(run_one "$mcpload")"
    else n="$(run_one "$mcpload")"; o="$(run_one "$OLD")"; fi
    r="$(python3 -c "print(round($n/$o, 3))")"
    echo "round $round: old $o req/s, new $n req/s, new/old $r"
    olds+=("$o"); news+=("$n"); ratios+=("$r")
done
m_old="$(printf '%s\n' "${olds[@]}" | median)"
m_new="$(printf '%s\n' "${news[@]}" | median)"
echo "median: old $m_old req/s, new $m_new req/s, ratio of medians $(python3 -c "print(round($m_new/$m_old, 3))"), median of round ratios $(printf '%s\n' "${ratios[@]}" | median)"
