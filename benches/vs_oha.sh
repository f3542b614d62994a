#!/usr/bin/env bash
# mcpload against oha in a closed loop, on the same target and body: the built-in target
# (`mcpload serve`, echo, JSON answers, HTTP/1.1 keep-alive), 64 concurrent, 2026-07-28
# headers. ROUNDS rounds (default 5) of SECS seconds (default 10), the order alternating.
# Per run: the throughput, the tool's CPU per request (user + system, the whole process) and
# the target's (its process's CPU over the same run). Prints each round, the medians, and the
# medians of the rounds' ratios (mcpload/oha) of throughput and of CPU per request. When the
# target's CPU per request is the same under both tools and the throughputs tie, the target
# set the pace, and CPU per request is what tells the tools apart.
# Needs oha (installed into benches/.tools on first use: `cargo install oha`).
source "$(dirname "$0")/common.sh"
need_oha
secs="${SECS:-10}"
rounds="${ROUNDS:-5}"
start_serve
target_ticks() { awk '{print $14 + $15}' "/proc/$serve_pid/stat"; }
ticks_per_s="$(getconf CLK_TCK)"
# Prints "<req/s> <tool CPU us/req> <target CPU us/req>" of one run of `oha` or `mcpload`.
measure() { # TOOL
    local out cpu rps before after wall
    out="$(mktemp -d)"
    TIMEFORMAT='%U %S'
    before="$(target_ticks)"
    if [[ "$1" == oha ]]; then
        cpu="$( { time "$oha" -z "${secs}s" -c 64 --no-tui "${oha_call[@]}" "$url" \
            >"$out/oha.txt" 2>/dev/null; } 2>&1 )"
        rps="$(awk '/Requests\/sec/ {print $2}' "$out/oha.txt")"
        wall="$secs"
    else
        cpu="$( { time "$mcpload" run -q --url "$url" --protocol 2026-07-28 -c 64 \
            -d "${secs}s" --warmup 1s --tool echo --args '{"message":"hi"}' \
            --out "$out/run" >/dev/null 2>&1; } 2>&1 )"
        rps="$(python3 -c "import csv; print(next(csv.DictReader(open('$out/run/steps.csv')))['throughput_rps'])")"
        # The warm-up runs at the same pace: the whole process's CPU over all its requests.
        wall="$((secs + 1))"
    fi
    after="$(target_ticks)"
    python3 -c "
user, system = map(float, '$cpu'.split())
requests = $rps * $wall
print(round($rps), round((user + system) * 1e6 / requests, 2),
      round(($after - $before) / $ticks_per_s * 1e6 / requests, 2))"
    rm -rf "$out"
}
ohas=(); ours=(); ratios=(); cpu_ratios=(); oha_cpu=(); our_cpu=(); oha_target=(); our_target=()
for round in $(seq "$rounds"); do
    if (( round % 2 )); then o=($(measure oha)); m=($(measure mcpload))
    else m=($(measure mcpload)); o=($(measure oha)); fi
    r="$(python3 -c "print(round(${m[0]}/${o[0]}, 3))")"
    c="$(python3 -c "print(round(${m[1]}/${o[1]}, 3))")"
    echo "round $round: oha ${o[0]} req/s ${o[1]} us/req (target ${o[2]}), mcpload ${m[0]} req/s ${m[1]} us/req (target ${m[2]}), mcpload/oha throughput $r, CPU per request $c"
    ohas+=("${o[0]}"); ours+=("${m[0]}"); ratios+=("$r"); cpu_ratios+=("$c")
    oha_cpu+=("${o[1]}"); our_cpu+=("${m[1]}"); oha_target+=("${o[2]}"); our_target+=("${m[2]}")
done
med() { printf '%s\n' "$@" | median; }
echo "median: oha $(med "${ohas[@]}") req/s $(med "${oha_cpu[@]}") us/req (target $(med "${oha_target[@]}")), mcpload $(med "${ours[@]}") req/s $(med "${our_cpu[@]}") us/req (target $(med "${our_target[@]}")), median of round ratios: throughput $(med "${ratios[@]}"), CPU per request $(med "${cpu_ratios[@]}")"
