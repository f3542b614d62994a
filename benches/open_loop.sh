#!/usr/bin/env bash
# Open-loop accuracy: arrivals at 1 000 to 20 000 per second against `mcpload serve` (which
# keeps up), constant spacing. Each rate is a run of its own, started cold (no connection
# open) with the default 1 s of warm-up, as a user's `mcpload run --rate R` is: one sweep
# from 1 000 up once reached 20 000 with the connections of the steps before, and measured a
# lag a user starting at 20 000 never saw. Prints, per rate, the achieved send rate (requests / duration) and its error, the
# schedule lag p99 and max, arrivals dropped, transport errors and the latency p99.
# RATES (default "1000 5000 10000 20000"), SECS (default 5).
source "$(dirname "$0")/common.sh"
start_serve
out="$(mktemp -d)"
secs="${SECS:-5}"
printf "%9s %11s %7s %11s %11s %8s %8s %8s\n" target/s achieved/s error "lag p99 ms" "lag max ms" \
    dropped errors "p99 ms"
for rate in ${RATES:-1000 5000 10000 20000}; do
    rm -rf "$out/run"
    "$mcpload" run -q --url "$url" --protocol 2026-07-28 --tool echo --args '{"message":"hi"}' \
        --rate "$rate" -d "${secs}s" --keep-going --out "$out/run" >/dev/null
    python3 - "$out/run/steps.csv" "$secs" <<'PY'
import csv, sys
secs = float(sys.argv[2])
for r in csv.DictReader(open(sys.argv[1])):
    target = float(r["target_rate"])
    achieved = int(r["requests"]) / secs
    print(f"{target:9.0f} {achieved:11.1f} {100*(achieved-target)/target:+6.2f}% "
          f"{r['schedule_lag_p99_ms']:>11} {r['schedule_lag_max_ms']:>11} "
          f"{r['dropped_arrivals']:>8} {r['transport_errors']:>8} {r['p99_ms']:>8}")
PY
done
rm -rf "$out"
