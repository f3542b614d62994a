#!/usr/bin/env python3
"""Tables of benches/ab_calibration.sh's results, in Markdown for benches/README.md.

    python3 benches/ab_calibration.py OUT_DIR      # default /tmp/ab-calibration

OUT_DIR holds truth/ (base-NN, slow-NN run folders) and one folder per condition (aa, ab,
dose+2.5, ...) of trial-NN ab folders, each with trial-NN.json beside it. Standard library
only: the Clopper-Pearson bounds come from a beta quantile found by bisection on the
regularized incomplete beta function (a Lentz continued fraction), the Kolmogorov-Smirnov
p-value from the Kolmogorov series with Stephens' correction.
"""
import csv
import glob
import json
import math
import os
import statistics
import sys

FIGURES = ("throughput_rps", "p50_ms", "p99_ms")
POWER_FIGURES = ("throughput_rps", "p99_ms")
VERDICTS = ("regressed", "improved", "equivalent", "inconclusive")


# ---- statistics -------------------------------------------------------------------------

def _beta_cf(a, b, x):
    """The continued fraction of I_x(a, b), evaluated by the modified Lentz method."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        # even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))
        num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        f *= c * d
        # odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        delta = c * d
        f *= delta
        if abs(delta - 1.0) < eps:
            break
    return f


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b), a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(ln_front) * _beta_cf(b, a, 1.0 - x) / b


def beta_quantile(p, a, b):
    """x with I_x(a, b) = p, by bisection (I is increasing in x)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if betainc(a, b, mid) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def cp_two_sided(k, n, level=0.95):
    """Clopper-Pearson interval for k successes of n."""
    if n == 0:
        return (0.0, 1.0)
    tail = (1 - level) / 2
    lo = 0.0 if k == 0 else beta_quantile(tail, k, n - k + 1)
    hi = 1.0 if k == n else beta_quantile(1 - tail, k + 1, n - k)
    return (lo, hi)


def cp_upper(k, n, level=0.95):
    """One-sided Clopper-Pearson upper bound (for k = 0: 1 - (1 - level)^(1/n))."""
    if n == 0 or k == n:
        return 1.0
    if k == 0:
        return 1.0 - (1.0 - level) ** (1.0 / n)
    return beta_quantile(level, k + 1, n - k)


def kolmogorov_q(lam):
    """P(K > lam) for the Kolmogorov distribution: 2 sum (-1)^(j-1) exp(-2 j^2 lam^2)."""
    if lam <= 0:
        return 1.0
    total = 0.0
    for j in range(1, 101):
        term = 2 * (-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam)
        total += term
        if abs(term) <= 1e-10 * abs(total) or abs(term) <= 1e-300:
            return min(1.0, max(0.0, total))
    return 1.0  # no convergence: lam is tiny, the fit is perfect as far as the series can tell


def ks_uniform(values):
    """D and the asymptotic p-value of a KS test of values against Uniform(0, 1)."""
    xs = sorted(min(1.0, max(0.0, v)) for v in values)
    n = len(xs)
    if n == 0:
        return None, None
    d = max(max((i + 1) / n - x, x - i / n) for i, x in enumerate(xs))
    rn = math.sqrt(n)
    return d, kolmogorov_q((rn + 0.12 + 0.11 / rn) * d)


# ---- reading the folders ----------------------------------------------------------------

def load_trials(out):
    """Every trial-NN.json under out, with its ab.json (None when it is missing)."""
    trials = []
    for meta_path in sorted(glob.glob(os.path.join(out, "*", "trial-*.json"))):
        meta = json.load(open(meta_path))
        ab_path = os.path.join(meta_path[: -len(".json")], "ab.json")
        ab = None
        if os.path.isfile(ab_path):
            try:
                ab = json.load(open(ab_path))
            except (OSError, ValueError) as e:
                meta["read_error"] = str(e)
        meta["ab"] = ab
        meta["error"] = (ab is None or meta.get("ab_exit") not in (0, 1)
                         or ab.get("status") in ("running", "interrupted"))
        trials.append(meta)
    return trials


def first_step_figures(ab):
    """{figure: entry} of op "*" at the first step ab.json names."""
    figs = [f for f in ab.get("figures", []) if f.get("op") == "*"]
    if not figs:
        return {}
    steps = [f.get("step") for f in figs]
    try:
        first = min(steps)
    except TypeError:
        first = steps[0]
    return {f["figure"]: f for f in figs if f.get("step") == first}


def has_verdict(ab, verdict):
    return any(f.get("verdict") == verdict for f in ab.get("figures", []))


# ---- tables -----------------------------------------------------------------------------

def pct(x):
    return f"{100 * x:.1f}%"


def rate(k, n):
    if n == 0:
        return "-"
    lo, hi = cp_two_sided(k, n)
    return f"{k}/{n} ({pct(k / n)}, {pct(lo)}-{pct(hi)})"


def condition_order(trials):
    order = []
    for t in trials:
        if t["condition"] not in order:
            order.append(t["condition"])
    key = {"aa": 0, "ab": 1}
    factor = {t["condition"]: float(t.get("factor", 1)) for t in trials}
    return sorted(order, key=lambda c: (key.get(c, 2), factor[c], c))


def overall_counts(ok):
    counts = {}
    for t in ok:
        v = t["ab"].get("verdict")
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{v} {n}" for v, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def alarm_cell(group):
    ran = [t for t in group if t.get("compare_exit") is not None]
    k = sum(1 for t in ran if t["compare_exit"] == 1)
    bad = sum(1 for t in ran if t["compare_exit"] not in (0, 1))
    return f"{k}/{len(ran)}" + (f" ({bad} compare errors)" if bad else "")


def condition_table(trials, split_busy):
    title = "by condition and busy loop" if split_busy else "by condition"
    print(f"### Verdicts {title}\n")
    print("For A/A, the bound is the one-sided 95% Clopper-Pearson upper bound on the rate of "
          "trials with any figure regressed; for A/B and the doses, power is the share of "
          "trials whose step-1 `*` figure regressed, with a two-sided 95% Clopper-Pearson "
          "interval. `compare` is the old fixed-10% gate on the first pair.\n")
    cols = ["condition", "B/A service"] + (["busy"] if split_busy else []) + [
        "trials", "errors", "any regressed", "any improved", "overall verdicts",
        "A/A false-alarm bound", "power throughput_rps", "power p99_ms",
        "power either", "compare alarms"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for cond in condition_order(trials):
        of_cond = [t for t in trials if t["condition"] == cond]
        for busy in (("yes", "no") if split_busy else (None,)):
            group = [t for t in of_cond if busy is None or t.get("busy") == busy]
            if not group:
                continue
            ok = [t for t in group if not t["error"]]
            n = len(ok)
            reg = sum(1 for t in ok if has_verdict(t["ab"], "regressed"))
            imp = sum(1 for t in ok if has_verdict(t["ab"], "improved"))
            is_aa = float(group[0].get("factor", 1)) == 1.0
            bound = (f"{reg}/{n}: < {pct(cp_upper(reg, n))}" if is_aa and n else "")
            power = {}
            for fig in POWER_FIGURES:
                power[fig] = sum(1 for t in ok
                                 if first_step_figures(t["ab"]).get(fig, {}).get("verdict") == "regressed")
            either = sum(1 for t in ok if any(
                first_step_figures(t["ab"]).get(fig, {}).get("verdict") == "regressed"
                for fig in POWER_FIGURES))
            row = [cond, f"{float(group[0]['factor']):.4g}"] + ([busy] if split_busy else []) + [
                str(len(group)), str(len(group) - n), f"{reg}/{n}", f"{imp}/{n}",
                overall_counts(ok), bound,
                "" if is_aa else rate(power["throughput_rps"], n),
                "" if is_aa else rate(power["p99_ms"], n),
                "" if is_aa else rate(either, n), alarm_cell(group)]
            print("| " + " | ".join(row) + " |")
    print()


def errors_list(trials):
    bad = [t for t in trials if t["error"]]
    if not bad:
        return
    print("### Trials that did not run\n")
    for t in bad:
        why = t.get("read_error") or ("no ab.json" if t["ab"] is None else "")
        print(f"- {t['condition']} trial {t['trial']:02d} (busy={t.get('busy')}): ab exit "
              f"{t.get('ab_exit')}{', ' + why if why else ''}")
    print()


def ks_table(trials):
    aa = [t for t in trials if not t["error"] and float(t.get("factor", 0)) == 1.0]
    print("### A/A p-values against Uniform(0, 1) (Kolmogorov-Smirnov)\n")
    print("One p_value per trial and figure, op `*`, first step. The pooled row mixes three "
          "figures of the same runs, which are not independent.\n")
    print("| figures | n | missing | D | p (asymptotic, Stephens) | share p < 0.05 |")
    print("|---|---|---|---|---|---|")
    pooled, pooled_missing = [], 0
    for fig in FIGURES + ("pooled",):
        if fig == "pooled":
            values, missing = pooled, pooled_missing
        else:
            values, missing = [], 0
            for t in aa:
                v = first_step_figures(t["ab"]).get(fig, {}).get("p_value")
                if isinstance(v, (int, float)) and math.isfinite(v):
                    values.append(float(v))
                else:
                    missing += 1
            pooled += values
            pooled_missing += missing
        d, p = ks_uniform(values)
        small = sum(1 for v in values if v < 0.05)
        print(f"| {fig} | {len(values)} | {missing} | "
              f"{'-' if d is None else f'{d:.3f}'} | {'-' if p is None else f'{p:.3f}'} | "
              f"{f'{small}/{len(values)}' if values else '-'} |")
    print()


def dose_label(factor):
    if abs(factor - 1 / 1.10) < 1e-4:
        return "10% faster (S/1.10)"
    x = (factor - 1) * 100
    return "0% (A/A)" if abs(x) < 1e-9 else f"{x:+.4g}%"


def dose_table(trials):
    by_factor = {}
    for t in trials:
        by_factor.setdefault(round(float(t.get("factor", 1)), 6), []).append(t)
    print("### Dose-response\n")
    print("Counts of each verdict of the step-1 `*` figure (regressed / improved / equivalent / "
          "inconclusive), the median ratio B/A `ab` reported, and the old fixed-10% "
          "compare's alarms on the first pair. 0% are the A/A trials, +10% the A/B trials.\n")
    print("| B slower by | trials | errors | throughput_rps r/i/e/n | median ratio | "
          "p99_ms r/i/e/n | median ratio | compare alarms |")
    print("|---|---|---|---|---|---|---|---|")
    for factor in sorted(by_factor):
        group = by_factor[factor]
        ok = [t for t in group if not t["error"]]
        cells = []
        for fig in POWER_FIGURES:
            entries = [first_step_figures(t["ab"]).get(fig, {}) for t in ok]
            counts = [sum(1 for e in entries if e.get("verdict") == v) for v in VERDICTS]
            other = len(entries) - sum(counts)
            cell = "/".join(map(str, counts)) + (f" (+{other} other)" if other else "")
            ratios = [e["ratio"] for e in entries if isinstance(e.get("ratio"), (int, float))]
            cells += [cell, f"{statistics.median(ratios):.3f}" if ratios else "-"]
        print(f"| {dose_label(factor)} | {len(group)} | {len(group) - len(ok)} | "
              + " | ".join(cells) + f" | {alarm_cell(group)} |")
    print()


def truth_table(out):
    folder = os.path.join(out, "truth")
    if not os.path.isdir(folder):
        print("### Truth\n\nno truth/ folder\n")
        return
    meta_path = os.path.join(folder, "truth.json")
    meta = json.load(open(meta_path)) if os.path.isfile(meta_path) else {}
    rows = {}
    for side in ("base", "slow"):
        for steps in sorted(glob.glob(os.path.join(folder, f"{side}-*", "steps.csv"))):
            r = next(csv.DictReader(open(steps)), None)
            if r:
                rows.setdefault(side, []).append({f: float(r[f]) for f in FIGURES})
    print("### Truth: the slowdown on a quiet machine (`mcpload run`, 20 s steps, alternating)\n")
    print("| side | service_ms | rounds | throughput_rps | p50_ms | p99_ms |")
    print("|---|---|---|---|---|---|")
    med = {}
    for side, ms in (("base", meta.get("base_service_ms")), ("slow", meta.get("slow_service_ms"))):
        runs = rows.get(side, [])
        if not runs:
            print(f"| {side} | {ms} | 0 | - | - | - |")
            continue
        med[side] = {f: statistics.median(r[f] for r in runs) for f in FIGURES}
        print(f"| {side} | {ms} | {len(runs)} | {med[side]['throughput_rps']:.1f} | "
              f"{med[side]['p50_ms']:.3f} | {med[side]['p99_ms']:.3f} |")
    if len(med) == 2:
        ratio = {f: med["slow"][f] / med["base"][f] for f in FIGURES}
        print(f"| slow/base | | | {ratio['throughput_rps']:.3f} | {ratio['p50_ms']:.3f} | "
              f"{ratio['p99_ms']:.3f} |")
    print()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ab-calibration"
    if not os.path.isdir(out):
        sys.exit(f"{out}: no such folder")
    trials = load_trials(out)
    print(f"## `mcpload ab` calibration ({out})\n")
    truth_table(out)
    if not trials:
        print("no trials found\n")
        return
    condition_table(trials, split_busy=False)
    condition_table(trials, split_busy=True)
    ks_table(trials)
    dose_table(trials)
    errors_list(trials)


if __name__ == "__main__":
    main()
