#!/usr/bin/env bash
# CPU per request of the open loop (issue #24): mcpload at a fixed arrival rate beside oha at
# the same rate (`-q R -c 64`) and beside the wire floor (benches/wire_floor.rs, the cheapest
# honest HTTP/1.1 client for the same exchange), all against one `mcpload serve`, echo,
# JSON answers, 2026-07-28 headers. For each rate in RATES (default "1000 5000 20000"; add
# 50000 by hand), ROUNDS rounds (default 5) of SECS seconds (default 5), the four runs in an
# order that rotates each round so a drift in the machine's load hits all alike. A tool's CPU
# is the user + sys time of its own process (wait4's rusage; the target is another process and
# is not counted) over the requests it completed (oha: its 200s from --output-format json;
# mcpload: steps.csv `responses`; the floor: its printed `requests=`). Prints each round, then
# per rate the medians: CPU µs per request, mcpload/oha, oha/floor and mcpload/floor (medians
# of the rounds' ratios), the achieved rate of each and mcpload's schedule lag p99.
# mcpload runs twice a round: as users run it by default (each arrival at its own instant),
# and as `mcpload_window`, with `--send-window WINDOW` (default 1ms: the arrivals of each
# millisecond sent in one wake-up, as oha releases them on tokio's 1 ms ticks).
# MCPLOAD_ARGS: more options for both mcpload runs (say `--workers 1`).
# Needs oha (installed into benches/.tools on first use: `cargo install oha`).
source "$(dirname "$0")/common.sh"
need_oha
floor="$(cd "$root" && cargo bench --bench wire_floor --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "wire_floor" and m.get("executable"):
        print(m["executable"])')"
[[ -x "$floor" ]] || { echo "cargo bench --bench wire_floor --no-run built no binary" >&2; exit 1; }
secs="${SECS:-5}"
rounds="${ROUNDS:-5}"
rates="${RATES:-1000 5000 20000}"
start_serve
work="$(mktemp -d)"
trap 'stop_serve; rm -rf "$work"' EXIT

# Runs CMD with its output into $work/out and prints the user + sys CPU seconds of that
# process alone (wait4's rusage), failing when it fails.
cpu_of() { # CMD...
    python3 -c 'import os, sys
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
pid = os.fork()
if pid == 0:
    os.dup2(out, 1)
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(f"{sys.argv[2]} failed ({os.waitstatus_to_exitcode(status)})")
print(f"{ru.ru_utime + ru.ru_stime:.6f}")' "$work/out" "$@"
}

# Each prints "CPU_SECONDS REQUESTS ACHIEVED_PER_S LAG_P99_MS" (lag "-" but for mcpload).
run_oha() { # RATE
    local cpu
    cpu="$(cpu_of "$oha" -z "${secs}s" -q "$1" -c 64 --no-tui --output-format json "${oha_call[@]}" "$url")"
    python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
ok = int(j["statusCodeDistribution"].get("200", 0))
print(sys.argv[2], ok, round(ok / j["summary"]["total"], 1), "-")' "$work/out" "$cpu"
}
run_mcpload() { # RATE [ARGS...]
    local cpu rate="$1"
    shift
    rm -rf "$work/run"
    cpu="$(cpu_of "$mcpload" run -q --url "$url" --protocol 2026-07-28 --rate "$rate" -d "${secs}s" \
        --warmup 0s --tool echo --args '{"message":"hi"}' --out "$work/run" ${MCPLOAD_ARGS:-} "$@")"
    python3 -c 'import csv, sys
r = next(csv.DictReader(open(sys.argv[1])))
print(sys.argv[2], r["responses"], round(float(r["throughput_rps"]), 1), r["schedule_lag_p99_ms"])' \
        "$work/run/steps.csv" "$cpu"
}
run_mcpload_window() { # RATE
    run_mcpload "$1" --send-window "${WINDOW:-1ms}"
}
run_floor() { # RATE
    local cpu
    cpu="$(cpu_of "$floor" "$url" "$1" "$secs")"
    python3 -c 'import sys
f = dict(kv.split("=") for kv in open(sys.argv[1]).read().split())
print(sys.argv[2], f["requests"], f["achieved_rps"], "-")' "$work/out" "$cpu"
}
us_per() { python3 -c "import sys; print(round(1e6 * $1 / max(int($2), 1), 2))"; }
ratio() { python3 -c "print(round($1 / $2, 3))"; }

tools=(oha mcpload mcpload_window floor)
mcploads=(mcpload mcpload_window)
# The median over the rounds of an array element named with $r, e.g. 'cpu[oha,$r]'.
m() { local r; for r in $(seq "$rounds"); do eval "echo \"\${$1}\""; done | median; }
for rate in $rates; do
    declare -A cpu=() got=() lag=()
    for round in $(seq "$rounds"); do
        line="rate $rate round $round (first ${tools[$(( (round - 1) % 4 ))]}):"
        for k in 0 1 2 3; do
            t="${tools[$(( (k + round - 1) % 4 ))]}"
            read -r c n a l <<<"$("run_$t" "$rate")"
            cpu[$t,$round]="$(us_per "$c" "$n")"
            got[$t,$round]="$a"
            lag[$t,$round]="$l"
        done
        for t in "${tools[@]}"; do
            line+=" $t ${cpu[$t,$round]} µs/req ${got[$t,$round]}/s"
            [[ "${lag[$t,$round]}" != - ]] && line+=" lag p99 ${lag[$t,$round]} ms"
            line+=","
        done
        cpu[of,$round]="$(ratio "${cpu[oha,$round]}" "${cpu[floor,$round]}")"
        line+=" oha/floor ${cpu[of,$round]}"
        for t in "${mcploads[@]}"; do
            cpu[$t/oha,$round]="$(ratio "${cpu[$t,$round]}" "${cpu[oha,$round]}")"
            cpu[$t/floor,$round]="$(ratio "${cpu[$t,$round]}" "${cpu[floor,$round]}")"
            line+=", $t/oha ${cpu[$t/oha,$round]}, $t/floor ${cpu[$t/floor,$round]}"
        done
        echo "$line"
    done
    echo "rate $rate/s, medians of $rounds rounds of ${secs}s (mcpload_window: --send-window ${WINDOW:-1ms}):"
    printf '  %-15s %12s %11s %11s\n' tool 'CPU µs/req' achieved/s 'lag p99 ms'
    for t in "${tools[@]}"; do
        l=-; [[ "${lag[$t,1]}" != - ]] && l="$(m "lag[$t,\$r]")"
        printf '  %-15s %11s %11s %11s\n' "$t" "$(m "cpu[$t,\$r]")" "$(m "got[$t,\$r]")" "$l"
    done
    echo "  CPU per request, medians of the rounds' ratios: oha/floor $(m 'cpu[of,$r]')"
    for t in "${mcploads[@]}"; do
        echo "    $t/oha $(m "cpu[$t/oha,\$r]"), $t/floor $(m "cpu[$t/floor,\$r]")"
    done
    unset cpu got lag
done
