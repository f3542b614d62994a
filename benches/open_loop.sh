#!/usr/bin/env bash
# Open-loop accuracy: arrivals at 1 000 to 20 000 per second against `mcpload serve` (which
# keeps up), constant spacing. Prints, per rate, the achieved send rate (requests / duration)
# and its error, and the p99 schedule lag.
source "$(dirname "$0")/common.sh"
start_serve
out="$(mktemp -d)"
secs="${SECS:-5}"
"$mcpload" run -q --url "$url" --rate 1000,5000,10000,20000 -d "${secs}s" --warmup 1s \
    --max-in-flight 20000 --keep-going --out "$out/run" >/dev/null
python3 - "$out/run/steps.csv" "$secs" <<'PY'
import csv, sys
secs = float(sys.argv[2])
print(f"{'target/s':>9} {'achieved/s':>11} {'error':>7} {'lag p99 ms':>11} {'dropped':>8} {'p99 ms':>8}")
for r in csv.DictReader(open(sys.argv[1])):
    target = float(r["target_rate"])
    achieved = int(r["requests"]) / secs
    print(f"{target:9.0f} {achieved:11.1f} {100*(achieved-target)/target:+6.2f}% "
          f"{r['schedule_lag_p99_ms']:>11} {r['dropped_arrivals']:>8} {r['p99_ms']:>8}")
PY
rm -rf "$out"
