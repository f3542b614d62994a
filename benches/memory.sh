#!/usr/bin/env bash
# Memory of a long run: 1 000 concurrent clients against `mcpload serve` until 2 million
# requests, RSS of the load generator sampled every 100 ms. Prints the peak RSS and the RSS
# when 200 000 and 2 000 000 requests had been sent (flat: within 10 %).
source "$(dirname "$0")/common.sh"
start_serve
out="$(mktemp -d)"
secs="${SECS:-150}"
python3 - "$mcpload" "$url" "$out" "$secs" <<'PY'
import csv, subprocess, sys, time
mcpload, url, out, secs = sys.argv[1:]
p = subprocess.Popen([mcpload, "run", "-q", "--url", url, "-c", "1000", "-d", f"{secs}s",
                      "--warmup", "0s", "--out", f"{out}/run"], stdout=subprocess.DEVNULL)
samples = []  # (seconds since start, rss kib)
t0 = time.monotonic()
while p.poll() is None:
    try:
        with open(f"/proc/{p.pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
        samples.append((time.monotonic() - t0, rss))
    except (FileNotFoundError, StopIteration):
        pass
    time.sleep(0.1)
rows = list(csv.DictReader(open(f"{out}/run/timeseries.csv")))
start = samples[0][0]
def rss_at(t):
    return min(samples, key=lambda s: abs(s[0] - t))[1]
total, marks = 0, {}
for r in rows:
    total += int(r["requests"])
    for m in (200_000, 2_000_000):
        if total >= m and m not in marks:
            marks[m] = float(r["t_s"]) + 1.0
peak = max(s[1] for s in samples)
print(f"requests sent: {total}; peak RSS {peak/1024:.1f} MiB")
for m, t in sorted(marks.items()):
    print(f"RSS after {m} requests (t={t:.0f}s): {rss_at(t)/1024:.1f} MiB")
if len(marks) == 2:
    a, b = rss_at(marks[200_000]), rss_at(marks[2_000_000])
    print(f"growth from 200k to 2M: {100*(b-a)/a:+.1f}%")
else:
    print("the run ended before 2 000 000 requests: raise SECS")
PY
rm -rf "$out"
