"""Reads an mcpload latency.hlog with HdrHistogram's Python port and prints, as JSON, what
it found per `step=N` tag: interval count, start timestamps, and the summed histogram's
count, min, max, mean and percentiles (values in microseconds)."""
import json
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def main(path):
    reader = HistogramLogReader(path, HdrHistogram(1, 3600000000, 3))
    steps = {}
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        tag = h.get_tag()
        entry = steps.setdefault(tag, {"intervals": 0, "starts_ms": [], "hist": None})
        entry["intervals"] += 1
        entry["starts_ms"].append(h.get_start_time_stamp())
        if entry["hist"] is None:
            entry["hist"] = HdrHistogram(1, 3600000000, 3)
        entry["hist"].add(h)
    out = {}
    for tag, e in steps.items():
        h = e["hist"]
        out[tag] = {
            "intervals": e["intervals"],
            "starts_ms": e["starts_ms"],
            "count": h.get_total_count(),
            "min": h.get_min_value(),
            "max": h.get_max_value(),
            "p50": h.get_value_at_percentile(50),
            "p90": h.get_value_at_percentile(90),
            "p99": h.get_value_at_percentile(99),
            "p999": h.get_value_at_percentile(99.9),
        }
    out["_start_time_sec"] = reader.get_start_time_sec()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
