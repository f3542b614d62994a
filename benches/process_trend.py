"""Imported by the scripts in benches/ that watch a load generator over time (soak.sh,
scenario_memory.sh): sample its process once a second, fit a line to a metric and judge its
growth against a limit."""
import math, os

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
