"""Imported by the scripts in benches/ that watch a load generator over time (soak.sh,
scenario_memory.sh, task_memory.sh): sample its process once a second, fit a line to a metric
and judge its growth against a limit."""
import csv, math, os, subprocess, sys, time

TICK = os.sysconf("SC_CLK_TCK")


def tcp_inodes(pid):
    """Inodes of the TCP sockets in the process's network namespace, in any state (a pooled
    connection the target closed waits in CLOSE_WAIT until the pool takes it again)."""
    out = set()
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                next(f)
                out.update(line.split()[9] for line in f)
        except FileNotFoundError:
            pass
    return out


def sample(pid):
    """(RSS KiB, open descriptors, of them TCP sockets, CPU seconds) of process `pid`."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            pass  # closed while listed
    tcp = tcp_inodes(pid)
    conns = sum(1 for l in links if l.startswith("socket:[") and l[8:-1] in tcp)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, from field 3
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15
    return rss, len(links), conns, cpu


def fit(points):
    """Least-squares slope, its standard error, and the mean of y."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    stt = sum((t - mt) ** 2 for t, _ in points)
    b = sum((t - mt) * (y - my) for t, y in points) / stt
    sse = sum((y - my - b * (t - mt)) ** 2 for t, y in points)
    return b, math.sqrt(sse / (n - 2) / stt), my


def fit2(points):
    """Least squares of y = a + b x + c t over points (x, t, y): (b, c), their standard
    errors, and the mean of y."""
    n = len(points)
    mx = sum(p[0] for p in points) / n
    mt = sum(p[1] for p in points) / n
    my = sum(p[2] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    stt = sum((p[1] - mt) ** 2 for p in points)
    sxt = sum((p[0] - mx) * (p[1] - mt) for p in points)
    sxy = sum((p[0] - mx) * (p[2] - my) for p in points)
    sty = sum((p[1] - mt) * (p[2] - my) for p in points)
    det = sxx * stt - sxt * sxt
    if det == 0:  # x never moved (or moved with t): a line in t alone
        c, se_c, _ = fit([(p[1], p[2]) for p in points])
        return (0.0, c), (0.0, se_c), my
    b = (sxy * stt - sty * sxt) / det
    c = (sty * sxx - sxy * sxt) / det
    sse = sum((p[2] - my - b * (p[0] - mx) - c * (p[1] - mt)) ** 2 for p in points)
    s2 = sse / (n - 3)
    return (b, c), (math.sqrt(s2 * stt / det), math.sqrt(s2 * sxx / det)), my


def verdict(growth, se_growth, limit):
    """A trend when even the growth's lower 95 % bound passes the limit; flat when its upper
    bound stays under; else the run cannot tell (too short or too noisy)."""
    if growth - 2 * se_growth > limit:
        return "TRENDS UP"
    return "flat" if growth + 2 * se_growth <= limit else "inconclusive (run longer)"


def rss_limit(mean_kib):
    """The RSS growth a flat run may show: max(5 % of the mean, 6 MiB). mimalloc commits and
    returns memory in 2 MiB steps; a step of height h fits as at most 1.5 h of growth, so
    6 MiB is the most two steps can fake."""
    return max(0.05 * mean_kib, 6 * 1024)


def watch(cmd, secs, csv_path, log_path):
    """Runs `cmd` (a `mcpload run` of one `secs`-second step), sampling its process once a
    second into `csv_path` (t_s, rss_kib, fds, conns, cpu_s) until it exits; kills it and
    exits when it is still running 120 s after its step's end, or when it fails. Returns the
    samples and its peak RSS (VmHWM, KiB: the report included)."""
    log = open(log_path, "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    deadline = t0 + secs + 120
    rows, peak = [], 0
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "rss_kib", "fds", "conns", "cpu_s"])
        k = 1
        while p.poll() is None:
            if time.monotonic() > deadline:
                p.kill()
                p.wait()
                sys.exit(f"mcpload still running {secs + 120}s after start; killed")
            time.sleep(max(0.0, t0 + k - time.monotonic()))
            k += 1
            try:
                rss, fds, conns, cpu = sample(p.pid)
                with open(f"/proc/{p.pid}/status") as s:
                    peak = next(int(l.split()[1]) for l in s if l.startswith("VmHWM:"))
            except (FileNotFoundError, ProcessLookupError, StopIteration):
                continue  # it ended between two looks
            t = time.monotonic() - t0
            rows.append((t, rss, fds, conns, cpu))
            w.writerow([f"{t:.3f}", rss, fds, conns, f"{cpu:.2f}"])
            f.flush()
    if p.returncode != 0:
        sys.exit(f"mcpload run exited {p.returncode}; see {log_path}")
    return rows, peak


def rss_flat(rows, secs, peak, falls_ok=False):
    """Prints RSS from a mark (1 minute, or a fifth of the run if shorter) to the step's end
    and a least-squares line fitted between them; flat (returns True) when RSS moved less
    than 10 % between the two (with `falls_ok`, rose less: a fall is allowed) and the fitted
    growth is under `rss_limit`. Exits when fewer than 20 samples fall between them."""
    mark = min(60.0, secs / 5)
    steady = [r for r in rows if mark <= r[0] <= secs]
    if len(steady) < 20:
        sys.exit(f"{len(steady)} samples after {mark:.0f}s; raise SECS")
    first, last = steady[0], steady[-1]
    growth = 100 * (last[1] - first[1]) / first[1]
    span = last[0] - first[0]
    b, se, mean = fit([(r[0], r[1]) for r in steady])
    limit = rss_limit(mean)
    trend = verdict(b * span, se * span, limit)
    print(f"RSS peak {peak / 1024:.1f} MiB (VmHWM, the report included); at {first[0]:.0f}s "
          f"{first[1] / 1024:.1f} MiB, at the step's end ({last[0]:.0f}s) {last[1] / 1024:.1f} "
          f"MiB, {growth:+.1f}%; between them min {min(r[1] for r in steady) / 1024:.1f}, max "
          f"{max(r[1] for r in steady) / 1024:.1f}, fitted slope {b * 60:+.1f} KiB/min, growth "
          f"{b * span:+.0f} ± {2 * se * span:.0f} KiB, limit {limit:.0f}: {trend}")
    print(f"descriptors at most {max(r[2] for r in rows)}, TCP sockets at most "
          f"{max(r[3] for r in rows)} (at the step's end {last[3]})")
    return (growth if falls_ok else abs(growth)) <= 10 and trend == "flat"
