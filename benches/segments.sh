#!/usr/bin/env bash
# The overhead of segmentation (issue #16): one `mcpload run` at a total rate R against four
# segments (four processes, `--segment I/4 --start-at`, R/4 each) at the same total, against
# one external `mcpload serve`. Both start on a common clock a moment ahead, so they live the
# same slots. Per round: CPU per request (user + sys of the load processes, from wait4's
# rusage, over the echo calls the target counted, warm-ups included) and the p99 schedule lag
# (the worst segment's for four). Prints medians of ROUNDS rounds, the order alternating.
# Usage: benches/segments.sh [RATE] [SECS] [ROUNDS]   (default 4000 5 3: about 2 minutes)
source "$(dirname "$0")/common.sh"
rate="${1:-4000}"; secs="${2:-5}"; rounds="${3:-3}"
start_serve
python3 - "$mcpload" "$url" "$rate" "$secs" "$rounds" <<'PY'
import csv, datetime, json, os, statistics, subprocess, sys, tempfile, urllib.request

mcpload, url, rate, secs, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
stats_url = url.rsplit("/", 1)[0] + "/stats"

def echo_calls():
    with urllib.request.urlopen(stats_url) as r:
        return json.load(r)["operations"].get("echo", {}).get("requests", 0)

def measure(segments):
    """Runs the load as `segments` processes; returns (CPU s, calls, worst lag p99 ms)."""
    start = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
    start = start.replace(microsecond=0) + datetime.timedelta(seconds=1)
    at = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    before = echo_calls()
    tmp = tempfile.mkdtemp()
    procs = []
    for i in range(1, segments + 1):
        args = [mcpload, "run", "-q", "--url", url, "--rate", rate, "-d", f"{secs}s",
                "--warmup", "1s", "--timeout", "1s", "--spacing", "constant",
                "--tool", "echo", "--args", '{"message":"hi"}', "--start-at", at,
                "--out", f"{tmp}/seg{i}"]
        if segments > 1:
            args += ["--segment", f"{i}/{segments}"]
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
    cpu = 0.0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        assert p.returncode == 0, f"mcpload run exited {p.returncode}"
        cpu += ru.ru_utime + ru.ru_stime
    calls = echo_calls() - before
    lags = [float(next(csv.DictReader(open(f"{tmp}/seg{i}/steps.csv")))["schedule_lag_p99_ms"])
            for i in range(1, segments + 1)]
    subprocess.run(["rm", "-rf", tmp])
    return cpu, calls, max(lags)

results = {1: [], 4: []}
for r in range(1, rounds + 1):
    order = (1, 4) if r % 2 else (4, 1)
    for n in order:
        cpu, calls, lag = measure(n)
        results[n].append((cpu / calls * 1e6, lag, calls))
        print(f"round {r}: {n} process(es): {calls} calls, CPU {cpu:.2f} s, "
              f"{cpu / calls * 1e6:.1f} µs/call, schedule lag p99 {lag:.3f} ms", flush=True)
for n, name in [(1, "one process"), (4, "4 segments ")]:
    us = statistics.median(x[0] for x in results[n])
    lag = statistics.median(x[1] for x in results[n])
    print(f"median {name}: {us:.1f} µs CPU per call, schedule lag p99 {lag:.3f} ms")
ratio = statistics.median(x[0] for x in results[4]) / statistics.median(x[0] for x in results[1])
print(f"4 segments / one process, CPU per call: {ratio:.2f}")
PY
