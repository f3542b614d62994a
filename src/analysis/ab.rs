//! The A/B verdict (docs/ab.md): per step, per operation and per figure (throughput, p50,
//! p99, error rate), a shift between two sides of repeated runs with its interval, judged
//! against a noise band as `regressed`, `improved`, `equivalent` or `inconclusive`, with Holm's
//! family-wise control over everything compared; and the trend check that keeps a run whose
//! steady window still moves out of the verdict.

use super::checks::theil_sen;
use super::stats::{self, RateTest, Shift, ShiftMethod};
use crate::metrics::Model;
use serde::{Deserialize, Serialize};

/// The figures judged, in report order.
pub const FIGURES: [Figure; 4] = [
    Figure::Throughput,
    Figure::P50,
    Figure::P99,
    Figure::ErrorRate,
];

/// One figure compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Figure {
    #[serde(rename = "throughput_rps")]
    Throughput,
    #[serde(rename = "p50_ms")]
    P50,
    #[serde(rename = "p99_ms")]
    P99,
    #[serde(rename = "error_rate")]
    ErrorRate,
}

impl Figure {
    /// Its name: the steps.csv column it is read from.
    pub fn as_str(self) -> &'static str {
        match self {
            Figure::Throughput => "throughput_rps",
            Figure::P50 => "p50_ms",
            Figure::P99 => "p99_ms",
            Figure::ErrorRate => "error_rate",
        }
    }

    /// Whether a larger value is the better one.
    fn higher_is_better(self) -> bool {
        matches!(self, Figure::Throughput)
    }
}

/// What the comparison says of a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbVerdict {
    /// B is worse than A past the band, with family-wise confidence.
    Regressed,
    /// B is better than A past the band, with family-wise confidence.
    Improved,
    /// The interval lies inside the band.
    Equivalent,
    /// None of the above: more runs would tell.
    Inconclusive,
}

impl AbVerdict {
    /// Its spelling in ab.json and every report.
    pub fn as_str(self) -> &'static str {
        match self {
            AbVerdict::Regressed => "regressed",
            AbVerdict::Improved => "improved",
            AbVerdict::Equivalent => "equivalent",
            AbVerdict::Inconclusive => "inconclusive",
        }
    }
}

/// How the runs of the two sides are set against each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Design {
    /// `mcpload ab`: run i of A and run i of B form a pair (interleaved on one machine).
    Paired,
    /// `compare` with several folders per side: each side's runs as independent samples.
    Unpaired,
    /// `compare` with one folder per side: batches of seconds of each run's steady window as
    /// samples. Blind to the noise between runs: a weak test.
    BatchMeans,
}

/// Where a figure was measured: a step (by its model and load) and an operation, `*` for the
/// whole step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// The step's number in the first observation that has it.
    pub step: u32,
    pub model: Model,
    /// Virtual clients (closed loop) or arrivals per second (open loop).
    pub load: f64,
    pub op: String,
}

impl Cell {
    fn same_place(&self, other: &Cell) -> bool {
        self.model == other.model && self.load == other.load && self.op == other.op
    }
}

/// The operation name of a whole step's cell.
pub const WHOLE_STEP: &str = "*";

/// One run's (or one batch's) figures at one cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub cell: Cell,
    /// Responses paired per second.
    pub throughput_rps: f64,
    /// From the merged histogram of the steady window.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// `requests − ok`, and `requests`: the error rate's counts.
    pub failed: u64,
    pub total: u64,
}

impl Measured {
    /// The figure's value, for the log-ratio figures (`None` for the error rate or a value
    /// that is not positive: no ratio).
    fn positive(&self, figure: Figure) -> Option<f64> {
        let v = match figure {
            Figure::Throughput => Some(self.throughput_rps),
            Figure::P50 => self.p50_ms,
            Figure::P99 => self.p99_ms,
            Figure::ErrorRate => None,
        }?;
        (v.is_finite() && v > 0.0).then_some(v)
    }
}

/// One sample of a side: a run, or a batch of a run.
pub type Observation = Vec<Measured>;

/// The band and the error rate allowed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbOptions {
    /// δ: a change within ±δ (ln(1+δ) on the log scale) is noise; 0.05 by default.
    pub band: f64,
    /// Family-wise error rate (Holm) of `regressed` and of `improved`; the level of each
    /// equivalence test. 0.05 by default.
    pub alpha: f64,
    /// Keep runs with a generator-bound step, with a warning (left out by default: their
    /// latencies include mcpload's own delay).
    pub keep_generator_bound: bool,
}

impl Default for AbOptions {
    fn default() -> Self {
        AbOptions {
            band: 0.05,
            alpha: 0.05,
            keep_generator_bound: false,
        }
    }
}

/// One figure at one cell, judged. ab.json's `figures` rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureVerdict {
    #[serde(flatten)]
    pub cell: Cell,
    pub figure: Figure,
    /// Samples judged: pairs (paired), or the smaller side's runs or batches.
    pub n: usize,
    /// `t`, `hodges_lehmann`, `welch` or `two_proportion`.
    pub method: String,
    /// A's and B's value: the geometric mean over the samples, or the pooled error rate.
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B / A as estimated (exp of the shift of ln), with its two-sided 90% interval (each end a
    /// one-sided 95% bound); the log-ratio figures only.
    pub ratio: Option<f64>,
    pub ratio_lo: Option<f64>,
    pub ratio_hi: Option<f64>,
    /// The error rate: B − A, its 90% interval, and the margin it is judged against
    /// (max(band × A, 3 / A's requests)).
    pub diff: Option<f64>,
    pub diff_lo: Option<f64>,
    pub diff_hi: Option<f64>,
    pub margin: Option<f64>,
    /// One-sided p-value that B is worse than A past the band; Holm-adjusted over every
    /// figure compared; Benjamini–Hochberg's q over the same family (for the listing only).
    pub p_worse: f64,
    pub p_worse_holm: f64,
    pub q_worse: f64,
    /// The same for better past the band.
    pub p_better: f64,
    pub p_better_holm: f64,
    /// The larger of the two one-sided p-values of the equivalence test (TOST).
    pub p_equivalent: f64,
    /// Two-sided p-value of no difference at all (uniform under A/A).
    pub p_value: f64,
    pub verdict: AbVerdict,
    /// Inconclusive: the samples that would likely decide it, from the observed spread;
    /// `null` when no practical number would.
    pub needed: Option<usize>,
}

/// A figure's test, before the family's adjustment.
struct Tested {
    cell: Cell,
    figure: Figure,
    n: usize,
    method: &'static str,
    a: Option<f64>,
    b: Option<f64>,
    ratio: Option<(f64, f64, f64)>,
    rate: Option<RateTest>,
    p_worse: f64,
    p_better: f64,
    p_equivalent: f64,
    p_value: f64,
    needed: Option<usize>,
}

/// Judges every figure at every cell found in both sides. Paired: `a[i]` and `b[i]` are pair
/// i (the shorter side decides how many pairs); otherwise each side's observations are
/// independent samples. A cell or figure with fewer than 2 samples on a side is left out.
pub fn judge(
    a: &[Observation],
    b: &[Observation],
    design: Design,
    options: &AbOptions,
) -> Vec<FigureVerdict> {
    let (a, b) = match design {
        Design::Paired => {
            let n = a.len().min(b.len());
            (&a[..n], &b[..n])
        }
        Design::Unpaired | Design::BatchMeans => (a, b),
    };
    let mut tested = Vec::new();
    for cell in cells(a, b) {
        let side = |obs: &[Observation]| -> Vec<Option<Measured>> {
            obs.iter()
                .map(|o| o.iter().find(|m| m.cell.same_place(&cell)).cloned())
                .collect()
        };
        let (at, bt) = (side(a), side(b));
        for figure in FIGURES {
            let t = match figure {
                Figure::ErrorRate => test_rate(&cell, &at, &bt, design, options),
                _ => test_ratio(&cell, figure, &at, &bt, design, options),
            };
            tested.extend(t);
        }
    }
    adjust(tested, options)
}

/// The cells of the first observation of A that B has too, in A's order, then any others
/// every side has.
fn cells(a: &[Observation], b: &[Observation]) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::new();
    for m in a.iter().flatten() {
        let in_b = b.iter().flatten().any(|n| n.cell.same_place(&m.cell));
        if in_b && !out.iter().any(|c| c.same_place(&m.cell)) {
            out.push(m.cell.clone());
        }
    }
    out
}

fn geometric_mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty())
        .then(|| (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

fn test_ratio(
    cell: &Cell,
    figure: Figure,
    a: &[Option<Measured>],
    b: &[Option<Measured>],
    design: Design,
    options: &AbOptions,
) -> Option<Tested> {
    let value = |m: &Option<Measured>| m.as_ref().and_then(|m| m.positive(figure));
    let (shift, av, bv) = match design {
        Design::Paired => {
            let pairs: Vec<(f64, f64)> = a
                .iter()
                .zip(b)
                .filter_map(|(x, y)| Some((value(x)?, value(y)?)))
                .collect();
            let d: Vec<f64> = pairs.iter().map(|(x, y)| (y / x).ln()).collect();
            let (av, bv): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
            (Shift::paired(&d)?, av, bv)
        }
        Design::Unpaired | Design::BatchMeans => {
            let av: Vec<f64> = a.iter().filter_map(value).collect();
            let bv: Vec<f64> = b.iter().filter_map(value).collect();
            let ln = |v: &[f64]| v.iter().map(|x| x.ln()).collect::<Vec<f64>>();
            (Shift::unpaired(&ln(&av), &ln(&bv))?, av, bv)
        }
    };
    let edge = options.band.ln_1p();
    // Worse is lower throughput, or higher latency.
    let (p_worse, p_better) = if figure.higher_is_better() {
        (shift.p_below(-edge), shift.p_above(edge))
    } else {
        (shift.p_above(edge), shift.p_below(-edge))
    };
    let p_equivalent = shift.p_above(-edge).max(shift.p_below(edge));
    Some(Tested {
        cell: cell.clone(),
        figure,
        n: shift.n,
        method: method_name(shift.method),
        a: geometric_mean(&av),
        b: geometric_mean(&bv),
        ratio: Some((shift.estimate.exp(), shift.lo.exp(), shift.hi.exp())),
        rate: None,
        p_worse,
        p_better,
        p_equivalent,
        p_value: shift.p_two_sided(),
        needed: shift.needed(edge, options.alpha),
    })
}

fn method_name(m: ShiftMethod) -> &'static str {
    match m {
        ShiftMethod::T => "t",
        ShiftMethod::HodgesLehmann => "hodges_lehmann",
        ShiftMethod::Welch => "welch",
    }
}

fn test_rate(
    cell: &Cell,
    a: &[Option<Measured>],
    b: &[Option<Measured>],
    design: Design,
    options: &AbOptions,
) -> Option<Tested> {
    let counts = |m: &Option<Measured>| m.as_ref().map(|m| (m.failed, m.total));
    let (ac, bc): (Vec<stats::Counts>, Vec<stats::Counts>) = match design {
        Design::Paired => a
            .iter()
            .zip(b)
            .filter_map(|(x, y)| Some((counts(x)?, counts(y)?)))
            .unzip(),
        Design::Unpaired | Design::BatchMeans => (
            a.iter().filter_map(counts).collect(),
            b.iter().filter_map(counts).collect(),
        ),
    };
    if ac.len() < 2 || bc.len() < 2 {
        return None;
    }
    let rate = RateTest::new(&ac, &bc, options.band)?;
    let p_equivalent = if rate.equivalent() { 0.0 } else { 1.0 };
    Some(Tested {
        cell: cell.clone(),
        figure: Figure::ErrorRate,
        n: ac.len().min(bc.len()),
        method: "two_proportion",
        a: Some(rate.rate_a),
        b: Some(rate.rate_b),
        ratio: None,
        p_worse: rate.p_worse,
        p_better: rate.p_better,
        p_equivalent,
        p_value: rate.p_two_sided,
        needed: None,
        rate: Some(rate),
    })
}

/// Holm over the family, then each figure's verdict.
fn adjust(tested: Vec<Tested>, options: &AbOptions) -> Vec<FigureVerdict> {
    let worse: Vec<f64> = tested.iter().map(|t| t.p_worse).collect();
    let better: Vec<f64> = tested.iter().map(|t| t.p_better).collect();
    let (worse_holm, better_holm) = (stats::holm(&worse), stats::holm(&better));
    let q = stats::benjamini_hochberg(&worse);
    tested
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let verdict = if worse_holm[i] < options.alpha {
                AbVerdict::Regressed
            } else if better_holm[i] < options.alpha {
                AbVerdict::Improved
            } else if t.p_equivalent < options.alpha {
                AbVerdict::Equivalent
            } else {
                AbVerdict::Inconclusive
            };
            let (ratio, ratio_lo, ratio_hi) = match t.ratio {
                Some((r, lo, hi)) => (Some(r), Some(lo), Some(hi)),
                None => (None, None, None),
            };
            FigureVerdict {
                cell: t.cell,
                figure: t.figure,
                n: t.n,
                method: t.method.to_owned(),
                a: t.a,
                b: t.b,
                ratio,
                ratio_lo,
                ratio_hi,
                diff: t.rate.as_ref().map(|r| r.diff),
                diff_lo: t.rate.as_ref().map(|r| r.lo),
                diff_hi: t.rate.as_ref().map(|r| r.hi),
                margin: t.rate.as_ref().map(|r| r.margin),
                p_worse: t.p_worse,
                p_worse_holm: worse_holm[i],
                q_worse: q[i],
                p_better: t.p_better,
                p_better_holm: better_holm[i],
                p_equivalent: t.p_equivalent,
                p_value: t.p_value,
                needed: (verdict == AbVerdict::Inconclusive)
                    .then_some(t.needed)
                    .flatten(),
                verdict,
            }
        })
        .collect()
}

/// The whole comparison's answer: `regressed` when any figure regressed; else `equivalent`
/// when every figure is; else `improved` when any improved and none is inconclusive; else
/// `inconclusive` (also with nothing compared).
pub fn overall(figures: &[FigureVerdict]) -> AbVerdict {
    let any = |v: AbVerdict| figures.iter().any(|f| f.verdict == v);
    if any(AbVerdict::Regressed) {
        AbVerdict::Regressed
    } else if figures.is_empty() || any(AbVerdict::Inconclusive) {
        AbVerdict::Inconclusive
    } else if any(AbVerdict::Improved) {
        AbVerdict::Improved
    } else {
        AbVerdict::Equivalent
    }
}

/// Fewest one-second points a trend is looked for in.
pub const TREND_MIN_POINTS: usize = 5;

/// A steady window's trend in throughput.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// Theil–Sen slope of throughput per second, in the window's median throughput per
    /// second (0.01 = 1% of the median more every second), with its 95% interval.
    pub slope_per_s: f64,
    pub lo_per_s: f64,
    pub hi_per_s: f64,
    /// The slope over the whole window, as a fraction of the median.
    pub change: f64,
    /// Significant (the interval excludes 0) and larger over the window than the band.
    pub trending: bool,
}

/// The trend of a steady window's per-second throughput `(t_s, rps)` (the soak checks' slope,
/// docs/checks.md), judged against `band`: `None` with fewer than [`TREND_MIN_POINTS`]
/// seconds, or no throughput to scale by.
pub fn trend(per_second: &[(f64, f64)], band: f64) -> Option<Trend> {
    if per_second.len() < TREND_MIN_POINTS {
        return None;
    }
    let mut values: Vec<f64> = per_second.iter().map(|p| p.1).collect();
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    if median.is_nan() || median <= 0.0 {
        return None;
    }
    let slope = theil_sen(per_second)?;
    let span = per_second.last()?.0 - per_second.first()?.0;
    let change = slope.per_s * span / median;
    Some(Trend {
        slope_per_s: slope.per_s / median,
        lo_per_s: slope.lo_per_s / median,
        hi_per_s: slope.hi_per_s / median,
        change,
        trending: (slope.lo_per_s > 0.0 || slope.hi_per_s < 0.0) && change.abs() > band,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    fn cell(op: &str) -> Cell {
        Cell {
            step: 1,
            model: Model::Closed,
            load: 8.0,
            op: op.to_owned(),
        }
    }

    /// A run at `rps` with latencies scaled by `lat` and `failed` of 10,000 requests failed.
    fn run(rps: f64, lat: f64, failed: u64) -> Observation {
        vec![Measured {
            cell: cell(WHOLE_STEP),
            throughput_rps: rps,
            p50_ms: Some(5.0 * lat),
            p99_ms: Some(9.0 * lat),
            failed,
            total: 10_000,
        }]
    }

    /// `k` pairs whose B is `slow` times slower than A, each run with ±`noise` drawn at
    /// random (shared by both members of a pair: the machine's mood of the moment) and a
    /// little of its own.
    fn pairs(k: usize, slow: f64, noise: f64, seed: u64) -> (Vec<Observation>, Vec<Observation>) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..k {
            let mood = 1.0 + rng.random_range(-noise..noise);
            let own = |rng: &mut SmallRng| 1.0 + rng.random_range(-0.01..0.01);
            let (ja, jb) = (own(&mut rng), own(&mut rng));
            a.push(run(1000.0 / mood * ja, mood * ja, 0));
            b.push(run(1000.0 / (mood * slow) * jb, mood * slow * jb, 0));
        }
        (a, b)
    }

    fn verdict_of(v: &[FigureVerdict], f: Figure) -> AbVerdict {
        v.iter().find(|x| x.figure == f).unwrap().verdict
    }

    #[test]
    fn a_tenth_slower_regresses_every_latency_and_the_throughput() {
        let (a, b) = pairs(8, 1.10, 0.3, 1);
        let v = judge(&a, &b, Design::Paired, &AbOptions::default());
        for f in [Figure::Throughput, Figure::P50, Figure::P99] {
            assert_eq!(verdict_of(&v, f), AbVerdict::Regressed, "{f:?}: {v:#?}");
        }
        let p99 = v.iter().find(|x| x.figure == Figure::P99).unwrap();
        let r = p99.ratio.unwrap();
        assert!((1.08..1.12).contains(&r), "ratio {r}");
        assert!(p99.ratio_lo.unwrap() > 1.05);
        // No errors on either side: equivalent by the rule of three.
        assert_eq!(verdict_of(&v, Figure::ErrorRate), AbVerdict::Equivalent);
        assert_eq!(overall(&v), AbVerdict::Regressed);
    }

    #[test]
    fn a_tenth_faster_improves_and_never_regresses() {
        let (a, b) = pairs(8, 1.0 / 1.10, 0.3, 2);
        let v = judge(&a, &b, Design::Paired, &AbOptions::default());
        for f in [Figure::Throughput, Figure::P50, Figure::P99] {
            assert_eq!(verdict_of(&v, f), AbVerdict::Improved, "{f:?}");
        }
        assert_eq!(overall(&v), AbVerdict::Improved);
    }

    #[test]
    fn the_same_server_twice_is_equivalent_and_pairing_is_what_makes_it_so() {
        let (a, b) = pairs(8, 1.0, 0.3, 3);
        let paired = judge(&a, &b, Design::Paired, &AbOptions::default());
        assert_eq!(overall(&paired), AbVerdict::Equivalent, "{paired:#?}");
        // Unpaired, the ±30% between runs swamps a 5% band: nothing can be told.
        let unpaired = judge(&a, &b, Design::Unpaired, &AbOptions::default());
        assert_eq!(verdict_of(&unpaired, Figure::P99), AbVerdict::Inconclusive);
        assert!(unpaired.iter().all(|f| f.verdict != AbVerdict::Regressed));
        let p99 = unpaired.iter().find(|x| x.figure == Figure::P99).unwrap();
        assert!(p99.needed.is_none_or(|n| n > 8), "{p99:?}");
    }

    #[test]
    fn a_a_never_alarms_across_many_seeded_trials_of_many_cells() {
        // 200 trials of 20 cells × 4 figures: Holm keeps the family-wise rate at 5%; with
        // the shared mood cancelling out, far fewer alarm.
        let mut alarms = 0;
        for seed in 0..200 {
            let (a, b) = pairs(8, 1.0, 0.3, 100 + seed);
            let spread = |obs: Vec<Observation>| -> Vec<Observation> {
                obs.into_iter()
                    .map(|o| {
                        (0..20)
                            .map(|i| {
                                let mut m = o[0].clone();
                                m.cell.op = format!("op{i}");
                                m
                            })
                            .collect()
                    })
                    .collect()
            };
            let v = judge(
                &spread(a),
                &spread(b),
                Design::Paired,
                &AbOptions::default(),
            );
            assert_eq!(v.len(), 80);
            alarms += usize::from(overall(&v) == AbVerdict::Regressed);
        }
        assert!(alarms <= 10, "{alarms} of 200 A/A trials alarmed");
    }

    #[test]
    fn an_error_rate_that_doubles_regresses_and_one_error_against_none_does_not() {
        let a: Vec<Observation> = (0..8).map(|_| run(1000.0, 1.0, 100)).collect();
        let b: Vec<Observation> = (0..8).map(|_| run(1000.0, 1.0, 200)).collect();
        let v = judge(&a, &b, Design::Paired, &AbOptions::default());
        let e = v.iter().find(|x| x.figure == Figure::ErrorRate).unwrap();
        assert_eq!(e.verdict, AbVerdict::Regressed, "{e:?}");
        assert!((e.diff.unwrap() - 0.01).abs() < 1e-9);

        let clean: Vec<Observation> = (0..8).map(|_| run(1000.0, 1.0, 0)).collect();
        let mut one = clean.clone();
        one[3] = run(1000.0, 1.0, 1);
        let v = judge(&clean, &one, Design::Paired, &AbOptions::default());
        let e = v.iter().find(|x| x.figure == Figure::ErrorRate).unwrap();
        assert_ne!(e.verdict, AbVerdict::Regressed, "{e:?}");
    }

    #[test]
    fn cells_missing_from_one_side_are_left_out_and_single_samples_are_not_judged() {
        let (a, mut b) = pairs(4, 1.0, 0.1, 5);
        for o in &mut b {
            o[0].cell.op = "other".into();
        }
        assert!(judge(&a, &b, Design::Paired, &AbOptions::default()).is_empty());
        let (a, b) = pairs(1, 1.0, 0.1, 6);
        assert!(judge(&a, &b, Design::Paired, &AbOptions::default()).is_empty());
    }

    #[test]
    fn a_clear_climb_trends_and_a_flat_noisy_window_does_not() {
        let climb: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64, 1000.0 + 20.0 * i as f64))
            .collect();
        let t = trend(&climb, 0.05).unwrap();
        assert!(t.trending, "{t:?}");
        assert!((t.change - 0.18 / 1.1).abs() < 0.03, "{t:?}");
        let mut rng = SmallRng::seed_from_u64(9);
        let flat: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64, 1000.0 + rng.random_range(-30.0..30.0)))
            .collect();
        assert!(!trend(&flat, 0.05).unwrap().trending);
        assert!(trend(&climb[..4], 0.05).is_none());
    }
}
