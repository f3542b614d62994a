#!/usr/bin/env bash
# The soak checks against a server whose misbehaviour is known exactly (issue #25):
#   SECS=120 KNOBS="--leak-bytes-per-call 4096 --leak-fd-every 50" bash benches/server_checks.sh
#   SECS=1800 COOLDOWN=300 bash benches/server_checks.sh      # no knob: no check may fail
# For each transport of TRANSPORT (default "json stdio") in turn:
#   json   `mcpload serve KNOBS` over HTTP, watched by --server-pid
#   stdio  `mcpload run --stdio "mcpload serve --stdio KNOBS"`, the child watched by itself
# mcpload runs one open-loop step of `echo` at RATE arrivals/s (default 200) for SECS seconds
# (default 120) after WARMUP (default 10s), then COOLDOWN (default 30s) with no load,
# `--leak-min-window` the step's length. Prints every check (status, value, unit, reason) from
# summary.json, and beside memory_leak and fd_leak the truth the knobs set: the bytes leaked a
# call (or a descriptor every N calls) times the calls answered a minute, and their ratio.
# Exits 1 if a run fails to run, or (without KNOBS) if a check fails.
source "$(dirname "$0")/common.sh"
secs="${SECS:-120}"
rate="${RATE:-200}"
warmup="${WARMUP:-10s}"
cooldown="${COOLDOWN:-30s}"
read -r -a knobs <<<"${KNOBS:-}"
status=0
for transport in ${TRANSPORT:-json stdio}; do
    run="$(mktemp -d)"
    case "$transport" in
        json) start_serve "${knobs[@]}"; target=(--url "$url" --server-pid "$serve_pid") ;;
        stdio) target=(--stdio "$mcpload serve --stdio ${knobs[*]}") ;;
        *) echo "unknown transport $transport (json or stdio)" >&2; exit 2 ;;
    esac
    echo "== $transport: $rate/s for ${secs}s after $warmup, then $cooldown of cool-down; knobs: ${knobs[*]:-none}"
    code=0
    "$mcpload" run -q "${target[@]}" --tool echo --args '{"message":"soak"}' --rate "$rate" \
        -d "${secs}s" --warmup "$warmup" --cooldown "$cooldown" --leak-min-window "${secs}s" \
        --out "$run/run" >/dev/null 2>"$run/stderr" || code=$?
    stop_serve
    if [[ ! -f "$run/run/summary.json" ]]; then
        echo "  the run did not run (exit $code):"; cat "$run/stderr"; status=1; continue
    fi
    python3 - "$run/run" "${knobs[@]}" <<'PY' || status=1
import csv, json, sys
folder, knobs = sys.argv[1], sys.argv[2:]
knob = dict(zip(knobs[::2], knobs[1::2]))
s = json.load(open(f"{folder}/summary.json"))
step = s["steps"][0]
per_min = step["responses"] / step["duration_s"] * 60
print(f"  {step['responses']} answered in {step['duration_s']:.0f} s ({per_min / 60:.1f}/s), "
      f"generator_bound {step['generator_bound']}")
truth = {}
if "--leak-bytes-per-call" in knob:
    truth["memory_leak"] = int(knob["--leak-bytes-per-call"]) * per_min / 2**20
if "--leak-fd-every" in knob:
    truth["fd_leak"] = per_min / int(knob["--leak-fd-every"])
failed = False
for c in s["checks"]:
    value = "" if c.get("value") is None else f"{c['value']:.4g} {c.get('unit') or ''}"
    line = f"  {c['id']:<14} {c['status']:<8} {value:<22}"
    if c["id"] in truth and c.get("value") is not None:
        line += f" truth {truth[c['id']]:.4g} (ratio {c['value'] / truth[c['id']]:.3f})"
    print(line + f"  {c['reason']}")
    failed |= c["status"] == "fail"
sys.exit(1 if failed and not knobs else 0)
PY
    rm -rf "$run"
done
exit "$status"
