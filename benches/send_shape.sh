#!/usr/bin/env bash
# The shape of the load each tool offers at a fixed rate (issue #24): when oha `-q R -c 64`,
# mcpload `--rate R` (each arrival at its own instant, the default) and mcpload
# `--rate R --send-window WINDOW` (default 1ms) put their requests on the wire, against one
# `mcpload serve`, echo, 2026-07-28 headers. Each tool's socket writes (`sendto` for mcpload,
# `writev` for oha; their `write`s go to eventfds, not sockets) are recorded with `perf
# record` on the syscall tracepoints, over SECS seconds (default 4) after a second of start;
# the middle two seconds are read. For each rate in RATES (default "5000 20000") it prints per
# tool the sends, the gaps between consecutive sends (p10, p50, p90, µs), the share of sends
# within 10 µs of the one before (sent together), and the mean and largest bunch (sends each
# within 10 µs of the one before). Needs perf with access to tracepoints (root, or
# kernel.perf_event_paranoid <= -1) and oha (installed on first use).
source "$(dirname "$0")/common.sh"
need_oha
command -v perf >/dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 1; }
secs="${SECS:-4}"
rates="${RATES:-5000 20000}"
start_serve
work="$(mktemp -d)"
trap 'stop_serve; rm -rf "$work"' EXIT

# Runs CMD under perf record, the socket-write tracepoints only.
record() { # CMD...
    perf record -q -e syscalls:sys_enter_sendto,syscalls:sys_enter_writev -o "$work/perf.data" \
        -- "$@" >/dev/null 2>&1
}
run_oha() { # RATE
    record "$oha" -z "$(( secs + 1 ))s" -q "$1" -c 64 --no-tui "${oha_call[@]}" "$url"
}
run_mcpload() { # RATE [ARGS...]
    local rate="$1"
    shift
    rm -rf "$work/run"
    record "$mcpload" run -q --url "$url" --protocol 2026-07-28 --rate "$rate" -d "${secs}s" \
        --warmup 1s --tool echo --args '{"message":"hi"}' --out "$work/run" "$@"
}
run_mcpload_window() { # RATE
    run_mcpload "$1" --send-window "${WINDOW:-1ms}"
}

# Reads the recording: the middle two seconds of sends to a socket (fd > 2).
shape() {
    perf script -i "$work/perf.data" -F time,event,trace 2>/dev/null | python3 -c 'import re, sys
times = []
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+):\s+\S+:\s+fd:\s*(0x[0-9a-f]+)", line)
    if m and int(m.group(2), 16) > 2:
        times.append(float(m.group(1)))
times.sort()
start = times[0] + 1.5
mid = [t for t in times if start <= t <= start + 2]
gaps = sorted((b - a) * 1e6 for a, b in zip(mid, mid[1:]))
q = lambda p: gaps[int(p * (len(gaps) - 1))]
bunches, n = [], 1
for a, b in zip(mid, mid[1:]):
    if (b - a) * 1e6 < 10:
        n += 1
    else:
        bunches.append(n)
        n = 1
bunches.append(n)
together = sum(g < 10 for g in gaps) / len(gaps)
print(f"{len(mid):>7} {q(.1):>8.1f} {q(.5):>8.1f} {q(.9):>8.1f} {together:>9.2f} "
      f"{len(mid) / len(bunches):>10.1f} {max(bunches):>9}")'
}

for rate in $rates; do
    echo "rate $rate/s (mcpload_window: --send-window ${WINDOW:-1ms}), the middle 2 s:"
    printf '  %-15s %7s %8s %8s %8s %9s %10s %9s\n' tool sends 'gap p10' p50 p90 together \
        'mean bunch' 'max bunch'
    for t in oha mcpload mcpload_window; do
        "run_$t" "$rate"
        printf '  %-15s %s\n' "$t" "$(shape)"
    done
done
