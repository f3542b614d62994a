#!/usr/bin/env bash
# Soak: does the load generator itself stay flat over a long steady run?
#   SECS=1800 bash benches/soak.sh                      # 30 minutes per transport
#   SECS=60 TRANSPORT=stdio RATE=1000 bash benches/soak.sh
# mcpload runs one open-loop step at RATE arrivals/s (default 500, at most MAX_IN_FLIGHT in
# flight, default 64) for SECS seconds (default 600) against this build's `mcpload serve` on
# loopback, over each transport of TRANSPORT in turn (default "json sse stdio"):
#   json   HTTP, one JSON body per answer (`serve`)
#   sse    HTTP, SSE answers (`serve --answer sse`)
#   stdio  `mcpload run --stdio "mcpload serve --stdio"`
# Once a second it samples the load generator's process (not the target's) into
# OUT/<transport>.csv (OUT: a folder, default benches/.soak): RSS (VmRSS, /proc/PID/status),
# open descriptors (/proc/PID/fd), how many of them are TCP sockets (the HTTP connection
# pool, matched against /proc/PID/net/tcp*), CPU time (utime+stime, /proc/PID/stat).
# Then it fits a least-squares line to each metric over time after the warm-up (the first
# 10 % of the run, at least 30 s) until the step's end (the report written after it is
# printed apart) and takes its growth over that window, with a 95 % band
# (2 standard errors). A metric TRENDS UP when even the band's low end passes its limit; it
# is flat when the high end stays under; else the run was too short or noisy to tell (said,
# not failed). The limits, and why:
#   RSS    max(5 % of the mean, 6 MiB). mimalloc commits and returns memory in 2 MiB steps;
#          a step of height h fits as at most 1.5 h of growth, so 6 MiB is the most two steps
#          can fake. Over 30 minutes that is ~230 KiB/min: a leak of ~8 bytes a
#          request at 500/s (raise RATE to see smaller per-request leaks sooner).
#   fds    descriptors other than TCP sockets (pipes, epoll, timers, files): 2 more over
#          the window. They are whole and few; a leak of one per N requests climbs for ever.
#   conns  TCP sockets: never more than the pool can hold (workers x MAX_IN_FLIGHT). A
#          stall fills the pool and it keeps its connections, so their count steps up with
#          the worst stall so far, which no slope can tell from a leak; a leak past the
#          pool's count shows as more sockets than it may hold. MAX_IN_FLIGHT bounds both
#          the connections and the memory a stall pulls in, so the plateau comes early.
#   CPU    CPU seconds per second: a change of 20 % of the mean over the window. The cost of a
#          request must not grow with the requests sent before it; 20 % stands above the
#          jitter of a shared machine.
# Prints the figures per transport; exits 1 if a metric trends up or a run fails. Each run
# ends by itself (-d); one still alive 120 s after its end is killed.
source "$(dirname "$0")/common.sh"
secs="${SECS:-600}"
rate="${RATE:-500}"
max_in_flight="${MAX_IN_FLIGHT:-64}"
out="${OUT:-$root/benches/.soak}"
mkdir -p "$out"
status=0
for transport in ${TRANSPORT:-json sse stdio}; do
    case "$transport" in
        json) start_serve; target=(--url "$url") ;;
        sse) start_serve --answer sse; target=(--url "$url") ;;
        stdio) target=(--stdio "$mcpload serve --stdio") ;;
        *) echo "unknown transport $transport (json, sse or stdio)" >&2; exit 2 ;;
    esac
    run="$(mktemp -d)"
    echo "== $transport: $rate/s for ${secs}s, samples in $out/$transport.csv"
    PYTHONPATH="$root/benches" python3 - "$transport" "$secs" "$max_in_flight" "$out/$transport.csv" "$run" \
        "$mcpload" run -q "${target[@]}" --rate "$rate" --max-in-flight "$max_in_flight" \
        -d "${secs}s" --warmup 0s --out "$run/run" <<'PY' && rm -rf "$run" || { status=1; echo "  kept $run"; }
import csv, os, subprocess, sys, time
from process_trend import fit, rss_limit, sample, verdict
transport, secs, max_in_flight, csv_path, run_dir = sys.argv[1:6]
secs, max_in_flight, cmd = int(secs), int(max_in_flight), sys.argv[6:]

log = open(f"{run_dir}/stdout.log", "w")
p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
t0 = time.monotonic()
deadline = t0 + secs + 120
rows = []  # (t_s, rss_kib, fds, conns, cpu_s, cpu_per_s)
with open(csv_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["t_s", "rss_kib", "fds", "conns", "cpu_s", "cpu_per_s"])
    k = 1
    while p.poll() is None:
        if time.monotonic() > deadline:
            p.kill()
            p.wait()
            sys.exit(f"{transport}: mcpload still running {secs + 120}s after start; killed")
        time.sleep(max(0.0, t0 + k - time.monotonic()))
        k += 1
        try:
            rss, fds, conns, cpu = sample(p.pid)
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue  # it ended between two looks
        t = time.monotonic() - t0
        per_s = (cpu - rows[-1][4]) / (t - rows[-1][0]) if rows else 0.0
        rows.append((t, rss, fds, conns, cpu, per_s))
        w.writerow([f"{t:.3f}", rss, fds, conns, f"{cpu:.2f}", f"{per_s:.4f}"])
        f.flush()
if p.returncode != 0:
    sys.exit(f"{transport}: mcpload run exited {p.returncode}; see {run_dir}/stdout.log")
step = next(csv.DictReader(open(f"{run_dir}/run/steps.csv")))
print(f"  requests {step['requests']}, {float(step['throughput_rps']):.1f} req/s, "
      f"errors {step['errors']}, dropped arrivals {step['dropped_arrivals']}, "
      f"p99 {step['p99_ms']} ms, in flight at most {step['in_flight_max']}")

warm = max(30.0, 0.1 * secs)
# The step's time only: after it, mcpload writes its report (plots, report.html), a burst
# that is no trend; its peak is printed apart.
steady = [r for r in rows if warm <= r[0] <= secs]
after = [r for r in rows if r[0] > secs]
if len(steady) < 20:
    sys.exit(f"{transport}: {len(steady)} samples after the {warm:.0f}s warm-up; raise SECS")
span = steady[-1][0] - steady[0][0]
print(f"  fitted over {steady[0][0]:.0f}..{steady[-1][0]:.0f} s ({len(steady)} samples)")
results = []
b, se, mean = fit([(r[0], r[1]) for r in steady])
limit = rss_limit(mean)
results.append(verdict(b * span, se * span, limit))
print(f"  RSS    mean {mean / 1024:.1f} MiB (min {min(r[1] for r in steady) / 1024:.1f}, "
      f"max {max(r[1] for r in steady) / 1024:.1f}); slope {b * 60:+.1f} KiB/min; growth "
      f"{b * span:+.0f} ± {2 * se * span:.0f} KiB, limit {limit:.0f}: {results[-1]}")
if after:
    print(f"  after the step (writing the report): peak RSS {max(r[1] for r in after) / 1024:.1f} MiB")
b, se, mean = fit([(r[0], r[2] - r[3]) for r in steady])
results.append(verdict(b * span, se * span, 2))
print(f"  fds    not TCP: mean {mean:.1f} (min {min(r[2] - r[3] for r in steady)}, "
      f"max {max(r[2] - r[3] for r in steady)}); growth {b * span:+.2f} ± {2 * se * span:.2f}, "
      f"limit 2: {results[-1]}")
# Each HTTP worker (one per core) opens a connection only when a request finds none idle,
# up to --max-in-flight; stdio has none.
bound = 0 if transport == "stdio" else len(os.sched_getaffinity(0)) * max_in_flight
most = max(r[3] for r in rows)
results.append("flat" if most <= bound else "TRENDS UP")
print(f"  conns  TCP sockets: at most {most} (after the warm-up "
      f"{min(r[3] for r in steady)}..{max(r[3] for r in steady)}), the pool holds "
      f"{bound}: {'within' if most <= bound else 'BEYOND: TRENDS UP'}")
b, se, mean = fit([(r[0], r[5]) for r in steady[1:]])
results.append(verdict(b * span, se * span, 0.2 * mean))
print(f"  CPU    mean {100 * mean:.2f} % of a core; growth {100 * b * span:+.2f} ± "
      f"{200 * se * span:.2f} points, limit {20 * mean:.2f}: {results[-1]}")
sys.exit(1 if "TRENDS UP" in results else 0)
PY
    stop_serve
    serve_pid=""
done
exit "$status"
