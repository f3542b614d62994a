#!/usr/bin/env bash
# Peak memory of `mcpload run` against hostile servers (issue #11, defect 8): for each KIND
# (default: huge-body, a declared 1 GiB body of spaces; sse-huge-event, one SSE event of
# 100 MB) and each client count (default 4 32 1000), one 2 s step against
# `mcpload serve --hostile KIND --hostile-every 3`; prints the run's peak RSS (VmHWM) and
# how the calls ended. Extra `mcpload run` flags go in ARGS (e.g.
# ARGS='--max-answer-memory 64MiB'); RUN is the binary measured (default: this tree's
# release build, which also plays the server).
#   benches/hostile_memory.sh
#   KINDS=sse-huge-event CLIENTS="1000" ARGS='--max-answer-memory 64MiB' benches/hostile_memory.sh
#   RUN=benches/.tools/rev-3cae501/target/release/mcpload benches/hostile_memory.sh
source "$(dirname "$0")/common.sh"
kinds="${KINDS:-huge-body sse-huge-event}"
clients="${CLIENTS:-4 32 1000}"
run="${RUN:-$mcpload}"
for kind in $kinds; do
    start_serve --hostile "$kind" --hostile-every 3
    for c in $clients; do
        out="$(mktemp -d)"
        # shellcheck disable=SC2086
        python3 - "$run" "$url" "$out" "$c" "$kind" ${ARGS:-} <<'PY'
import csv, subprocess, sys, time
mcpload, url, out, clients, kind, *extra = sys.argv[1:]
p = subprocess.Popen([mcpload, "run", "-q", "--url", url, "--protocol", "2025-03-26",
                      "-c", clients, "-d", "2s", "--warmup", "0s", "--timeout", "5s",
                      "--out", f"{out}/run", *extra], stdout=subprocess.DEVNULL)
peak = 0
while p.poll() is None:
    try:
        with open(f"/proc/{p.pid}/status") as f:
            peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
    except (FileNotFoundError, StopIteration, ProcessLookupError):
        pass
    time.sleep(0.05)
row = next(csv.DictReader(open(f"{out}/run/steps.csv")))
ends = " ".join(f"{k}={row[k]}" for k in ("requests", "ok", "missing", "parse_errors",
                                           "timeouts", "transport_errors") if row[k] != "0")
print(f"{kind:15} {clients:>5} clients: peak RSS {peak / 1024:6.1f} MiB  {ends}")
PY
        rm -rf "$out"
    done
    stop_serve
done
