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
run_old() { echo_throughput "$OLD"; }
run_new() { echo_throughput "$mcpload"; }
alternate_rounds old run_old new run_new
