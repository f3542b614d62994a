#!/usr/bin/env bash
# Calibration of `mcpload ab` (issue "A regression verdict that knows the noise"): does its
# verdict raise false alarms when nothing changed, and does it find a known slowdown?
#   bash benches/ab_calibration.sh                  # everything below, then the tables
#   TRIALS=4 DOSE_TRIALS=2 K=4 OUT=/tmp/abc bash benches/ab_calibration.sh   # a quick look
#   python3 benches/ab_calibration.py /tmp/ab-calibration   # the tables again, from the folders
# Every side is the built-in target with a fixed service time (S ms, default 20, no capacity
# limit), loaded by benches/ab_calibration.toml: 8 closed-loop clients calling `echo`, one
# (At 5 ms the timer's granularity blunts a 10 % slowdown to 3.6 % at the median; at 20 ms
# the measured effect is the injected one.)
# step of 2 s after 500 ms of warm-up.
#   truth  `mcpload run` at S and at 1.10*S, 20 s steps, 3 alternating rounds each: the effect
#          of the injected slowdown measured with time to spare (OUT/truth/{base,slow}-NN)
#   aa     A/A: S against S, TRIALS (20) trials of `mcpload ab --pairs K` (K=8)
#   ab     A/B: S against 1.10*S, TRIALS trials
#   dose+2.5, dose+5, dose+20, dose-faster10: B at S*1.025, S*1.05, S*1.20 and S/1.10,
#          DOSE_TRIALS (5) trials each (0 % and +10 % are the aa and ab trials, not rerun)
# In each of aa, ab and the doses, half of the trials (chosen at random, RANDOM=42) run beside
# a busy loop: bursts of 0.1-0.9 s spinning on every core (BUSY_CORES, default nproc),
# 0.1-1.9 s apart, stopped at the end of the trial (and on exit).
# Each trial also runs the old fixed-tolerance gate on the same data: `mcpload compare` of its
# first pair (a-01 against b-01), exit 1 = a figure >10% worse.
# AB_ARGS (word-split) goes to every `mcpload ab`, e.g. AB_ARGS=--keep-generator-bound.
# A trial is OUT/CONDITION/trial-NN (the ab run folder), beside it trial-NN.json (condition,
# busy, service times, seed, exit codes), trial-NN.log (ab's output) and trial-NN.compare.txt.
# A trial whose ab exits other than 0 or 1 is reported as an error (and the script exits 1).
# Duration with the defaults: an ab trial is 2*K = 16 runs of ~2.8 s (2 s + 0.5 s warm-up +
# start-up) = ~45 s; 20 + 20 + 4*5 = 60 trials = ~46 min; truth 6 runs of ~21.5 s = ~2 min;
# about 50 minutes in all (plus the release build).
source "$(dirname "$0")/common.sh"
RANDOM=42
s="${S:-20}"
k="${K:-8}"
trials="${TRIALS:-20}"
dose_trials="${DOSE_TRIALS:-5}"
out="${OUT:-/tmp/ab-calibration}"
cores="${BUSY_CORES:-$(nproc)}"
profile="$root/benches/ab_calibration.toml"
command -v setsid >/dev/null || { echo "setsid (util-linux) is needed for the busy loop" >&2; exit 2; }
if [[ -e "$out" && -n "$(ls -A "$out" 2>/dev/null)" ]]; then
    echo "$out is not empty: remove it or set OUT" >&2; exit 2
fi
mkdir -p "$out"
mul() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6g", a * b }'; }

# The busy loop: its own session and process group (setsid without a fork: a background job
# of a script leads no group), so one kill of the group ends the loop and its bursts
# (`timeout --foreground` keeps each burst in that group).
busy_pid=""
start_busy() { # SEED
    # shellcheck disable=SC2016  # expanded by the inner bash
    setsid bash -c 'RANDOM=$1
        while :; do
            sleep "$((RANDOM % 2)).$((RANDOM % 9 + 1))"
            for _ in $(seq "$2"); do
                timeout --foreground "0.$((RANDOM % 9 + 1))" sh -c "while :; do :; done" &
            done
            wait
        done' busy "$1" "$cores" </dev/null >/dev/null 2>&1 &
    busy_pid=$!
}
stop_busy() {
    if [[ -n "$busy_pid" ]]; then
        kill -- "-$busy_pid" 2>/dev/null || kill "$busy_pid" 2>/dev/null || true
        wait "$busy_pid" 2>/dev/null || true
        busy_pid=""
    fi
}
trap 'stop_busy; stop_serve' EXIT
trap 'exit 130' INT TERM

# Sets busy_flags to N words, exactly N/2 of them "yes" at random places (Fisher-Yates on
# $RANDOM in this shell, so the choice follows from RANDOM=42).
busy_flags=()
choose_busy() { # N
    local n=$1 i j t
    busy_flags=()
    for ((i = 0; i < n; i++)); do
        if ((i < n / 2)); then busy_flags+=(yes); else busy_flags+=(no); fi
    done
    for ((i = n - 1; i > 0; i--)); do
        j=$((RANDOM % (i + 1)))
        t="${busy_flags[i]}"; busy_flags[i]="${busy_flags[j]}"; busy_flags[j]="$t"
    done
}

errors=0
run_trial() { # CONDITION TRIAL FACTOR LABEL BUSY
    local cond=$1 n=$2 factor=$3 label=$4 busy=$5
    local name dir b_ms seed code=0 ccode=null started verdicts
    name="trial-$(printf %02d "$n")"
    dir="$out/$cond/$name"
    b_ms="$(mul "$s" "$factor")"
    seed=$((RANDOM * 32768 + RANDOM))
    mkdir -p "$out/$cond"
    started=$SECONDS
    [[ "$busy" == yes ]] && start_busy "$seed"
    "$mcpload" ab "$profile" --a-builtin "service_ms=$s,capacity=0" \
        --b-builtin "service_ms=$b_ms,capacity=0" --pairs "$k" --seed "$seed" \
        -c 8 -d 2s --warmup 500ms -q ${AB_ARGS:-} --out "$dir" >"$dir.log" 2>&1 || code=$?
    stop_busy
    if [[ -d "$dir/a-01" && -d "$dir/b-01" ]]; then
        ccode=0
        "$mcpload" compare "$dir/a-01" "$dir/b-01" >"$dir.compare.txt" 2>&1 || ccode=$?
    fi
    printf '{"condition": "%s", "trial": %d, "busy": "%s", "factor": %s, "label": "%s", "a_service_ms": %s, "b_service_ms": %s, "pairs": %d, "seed": %d, "ab_exit": %d, "compare_exit": %s, "seconds": %d}\n' \
        "$cond" "$n" "$busy" "$factor" "$label" "$s" "$b_ms" "$k" "$seed" "$code" "$ccode" \
        "$((SECONDS - started))" >"$dir.json"
    if [[ "$code" != 0 && "$code" != 1 ]] || [[ ! -f "$dir/ab.json" ]]; then
        errors=$((errors + 1))
        echo "$cond $name busy=$busy: ERROR: ab exited $code$([[ -f "$dir/ab.json" ]] || echo ', no ab.json'): $(tail -3 "$dir.log" | tr '\n' ' ')"
        return 0
    fi
    verdicts="$(python3 - "$dir/ab.json" <<'PY'
import json, sys
ab = json.load(open(sys.argv[1]))
figs = [f for f in ab.get("figures", []) if f.get("op") == "*"]
first = figs[0]["step"] if figs else None
parts = [f"{f['figure']} {f['verdict']} ({f['ratio']:.3f})" if isinstance(f.get("ratio"), (int, float))
         else f"{f['figure']} {f['verdict']}" for f in figs if f["step"] == first]
print(f"verdict {ab.get('verdict')}: " + ", ".join(parts))
PY
)" || verdicts="ab.json unreadable"
    echo "$cond $name busy=$busy B=${b_ms}ms: ab exit $code, $verdicts; compare exit $ccode [$((SECONDS - started)) s]"
}

run_condition() { # CONDITION N FACTOR LABEL
    local i
    choose_busy "$2"
    echo "== $1: A service_ms=$s, B service_ms=$(mul "$s" "$3") ($4), $2 trials of $k pairs"
    for ((i = 1; i <= $2; i++)); do
        run_trial "$1" "$i" "$3" "$4" "${busy_flags[i - 1]}"
    done
}

# The truth: the slowdown measured on a quiet machine, long steps, alternating order.
mkdir -p "$out/truth"
slow_ms="$(mul "$s" 1.10)"
printf '{"base_service_ms": %s, "slow_service_ms": %s, "rounds": 3, "duration_s": 20}\n' \
    "$s" "$slow_ms" >"$out/truth/truth.json"
truth_run() { # NAME ROUND SERVICE_MS
    local dir code=0
    dir="$out/truth/$1-$(printf %02d "$2")"
    "$mcpload" run --builtin --builtin-knob "service_ms=$3" -c 8 -d 20s --warmup 1s \
        --tool echo --args '{"message":"hi"}' --out "$dir" -q >"$dir.log" 2>&1 || code=$?
    if [[ ! -f "$dir/steps.csv" ]]; then
        echo "truth $1 round $2: ERROR: run exited $code without steps.csv:"; tail -5 "$dir.log"; exit 1
    fi
    echo "truth $1 round $2 service_ms=$3: exit $code, $(python3 -c "import csv, sys; r = next(csv.DictReader(open(sys.argv[1]))); print(f\"{float(r['throughput_rps']):.1f} req/s, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms\")" "$dir/steps.csv")"
}
echo "== truth: service_ms $s against $slow_ms, 3 alternating rounds of 20 s"
for round in 1 2 3; do
    if ((round % 2)); then
        truth_run base "$round" "$s"; truth_run slow "$round" "$slow_ms"
    else
        truth_run slow "$round" "$slow_ms"; truth_run base "$round" "$s"
    fi
done

run_condition aa "$trials" 1 "A/A"
run_condition ab "$trials" 1.10 "10% slower"
run_condition dose+2.5 "$dose_trials" 1.025 "2.5% slower"
run_condition dose+5 "$dose_trials" 1.05 "5% slower"
run_condition dose+20 "$dose_trials" 1.20 "20% slower"
run_condition dose-faster10 "$dose_trials" "$(awk 'BEGIN { printf "%.6g", 1 / 1.10 }')" "10% faster"

echo
python3 "$root/benches/ab_calibration.py" "$out"
if ((errors)); then
    echo "$errors trial(s) did not run (ab exit other than 0/1): see the ERROR lines above" >&2
    exit 1
fi
