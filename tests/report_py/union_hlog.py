"""Reads interval logs with HdrHistogram's Python port: the first, a merged log, and the
rest, the logs merged into it. Prints, as JSON, per tag: the merged log's histogram (its
intervals of that tag added up) and the union of the other logs' intervals of that tag,
each as count, min, max and percentiles (values as recorded)."""
import json
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def new():
    # Wide enough for latencies (1 us .. 1 h) and for counts (batch members, polls).
    return HdrHistogram(1, 3600000000, 3)


def by_tag(paths):
    out = {}
    for path in paths:
        reader = HistogramLogReader(path, new())
        while True:
            h = reader.get_next_interval_histogram()
            if h is None:
                break
            acc = out.setdefault(h.get_tag(), new())
            # hdrh's add() takes an empty histogram's minimum as 0: an empty interval (a
            # segment with no share of a step) adds nothing, so it is skipped.
            if h.get_total_count() > 0:
                acc.add(h)
    return out


def figures(h):
    return {
        "count": h.get_total_count(),
        "min": h.get_min_value(),
        "max": h.get_max_value(),
        "p50": h.get_value_at_percentile(50),
        "p90": h.get_value_at_percentile(90),
        "p99": h.get_value_at_percentile(99),
        "p999": h.get_value_at_percentile(99.9),
    }


def main(merged, parts):
    m, u = by_tag([merged]), by_tag(parts)
    tags = sorted(set(m) | set(u), key=str)
    json.dump(
        {
            str(t): {
                "merged": figures(m[t]) if t in m else None,
                "union": figures(u[t]) if t in u else None,
            }
            for t in tags
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
