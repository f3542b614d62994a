#!/usr/bin/env bash
# `mcpload merge` of 100 segments of a 10-step run, 60 one-second intervals per step (10
# minutes): the folders are written by benches/merge_fixture.rs through the library's own
# RunFolder from synthetic stats (not by real runs); then the merge runs $rounds times.
# Prints each round's wall time and peak RSS (GNU time), then the medians.
#   benches/merge.sh [SEGMENTS] [ROUNDS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
segments="${1:-100}"
rounds="${2:-3}"
target="${CARGO_TARGET_DIR:-$root/target}"
mcpload="$target/release/mcpload"
(cd "$root" && cargo build --release --quiet)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$root" && cargo bench --quiet --bench merge_fixture -- "$work/in" "$segments")
echo "inputs: $segments folders, $(du -sh "$work/in" | cut -f1) ($(du -sh "$work/in/segment-001" | cut -f1) each)"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
secs=(); rss=()
for r in $(seq "$rounds"); do
    rm -rf "$work/out"
    /usr/bin/time -f "%e %M" -o "$work/time" "$mcpload" merge "$work"/in/segment-* \
        --out "$work/out" >/dev/null
    read -r s m <"$work/time"
    echo "round $r: ${s} s, peak RSS $((m / 1024)) MiB"
    secs+=("$s"); rss+=("$m")
done
echo "median: $(printf '%s\n' "${secs[@]}" | median) s, peak RSS $(( $(printf '%s\n' "${rss[@]}" | median | cut -d. -f1) / 1024 )) MiB"
python3 -c "import csv; r=list(csv.DictReader(open('$work/out/steps.csv'))); print('merged:', len(r), 'steps, step 10 requests', r[-1]['requests'], 'concurrency', r[-1]['concurrency'])"
