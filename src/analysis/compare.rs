//! Two runs side by side: steps matched by model and load, each key figure compared, and a
//! regression flagged where the new run is worse than the base by more than a tolerance.

use super::knee::Knee;
use crate::metrics::{Model, StepSummary};

/// How much worse is still noise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompareOptions {
    /// Relative tolerance: 0.10 lets a figure get 10% worse before it is a regression.
    pub tolerance: f64,
    /// A latency must also grow by more than this many milliseconds (sub-millisecond jitter is
    /// not a regression).
    pub latency_floor_ms: f64,
    /// An error rate must also grow by more than this absolute amount (0.001 = 0.1 point).
    pub error_rate_floor: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            tolerance: 0.10,
            latency_floor_ms: 1.0,
            error_rate_floor: 0.001,
        }
    }
}

/// Which direction is better for a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// One figure in both runs.
#[derive(Clone, Debug, PartialEq)]
pub struct FigureDelta {
    /// The column or knee figure, e.g. `p99_ms`.
    pub figure: &'static str,
    pub base: Option<f64>,
    pub new: Option<f64>,
    pub better: Better,
    /// Worse than the base beyond the tolerance (and floors).
    pub regressed: bool,
}

impl FigureDelta {
    /// `(new − base) / base`, when both exist and the base is not 0.
    pub fn change(&self) -> Option<f64> {
        match (self.base, self.new) {
            (Some(b), Some(n)) if b != 0.0 => Some((n - b) / b),
            _ => None,
        }
    }
}

/// The same load in both runs.
#[derive(Clone, Debug, PartialEq)]
pub struct StepDelta {
    pub model: Model,
    pub load: f64,
    pub base_step: u32,
    pub new_step: u32,
    pub figures: Vec<FigureDelta>,
}

/// Two runs compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The relative tolerance the comparison used.
    pub tolerance: f64,
    pub steps: Vec<StepDelta>,
    /// Loads measured in only one of the runs (not regressions by themselves: a sweep that
    /// stopped earlier shows in the knee).
    pub only_in_base: Vec<f64>,
    pub only_in_new: Vec<f64>,
    pub knee: Vec<FigureDelta>,
    /// Steps of each run that the generator itself limited (`generator_bound`): their
    /// figures describe mcpload, so a difference there may not be the server's.
    pub base_generator_bound: Vec<u32>,
    pub new_generator_bound: Vec<u32>,
}

impl Comparison {
    /// Every regression as (where, figure): `step 3 (load 8)` or `knee`.
    pub fn regressions(&self) -> Vec<(String, &FigureDelta)> {
        let steps = self.steps.iter().flat_map(|s| {
            s.figures
                .iter()
                .filter(|f| f.regressed)
                .map(move |f| (format!("step {} (load {})", s.new_step, s.load), f))
        });
        let knee = self
            .knee
            .iter()
            .filter(|f| f.regressed)
            .map(|f| ("knee".to_owned(), f));
        steps.chain(knee).collect()
    }

    /// Whether the steps of the two runs had any load in common.
    pub fn matched(&self) -> bool {
        !self.steps.is_empty()
    }
}

fn worse(better: Better, base: Option<f64>, new: Option<f64>, tol: f64, floor: f64) -> bool {
    match (base, new) {
        (Some(b), Some(n)) => match better {
            Better::Higher => n < b * (1.0 - tol) && b - n > floor,
            Better::Lower => n > b * (1.0 + tol) && n - b > floor,
        },
        // The base had the figure and the new run lost it (no responses, unreached).
        (Some(_), None) => true,
        _ => false,
    }
}

/// Compares `new` against `base`. Steps pair up by model and load; per pair: `throughput_rps`
/// (higher is better), `p50_ms`, `p99_ms`, `error_rate` and `anomalies` (lower is better).
/// The knee: `max_sustainable`, `peak_throughput_rps` (higher is better) and
/// `failure_point` (a new run failing at a lower load, or at a load the base passed, is a
/// regression). Interrupted steps are left out.
pub fn compare(
    base: (&[StepSummary], &Knee),
    new: (&[StepSummary], &Knee),
    o: &CompareOptions,
) -> Comparison {
    let complete = |v: &[StepSummary]| -> Vec<StepSummary> {
        v.iter().filter(|s| !s.interrupted).cloned().collect()
    };
    let (bs, ns) = (complete(base.0), complete(new.0));
    let key = |s: &StepSummary| (s.model, s.load());
    let find = |v: &[StepSummary], k: (Model, f64)| v.iter().find(|s| key(s) == k).cloned();

    let mut steps = Vec::new();
    let mut only_in_base = Vec::new();
    for b in &bs {
        let Some(n) = find(&ns, key(b)) else {
            only_in_base.push(b.load());
            continue;
        };
        let fig = |figure, better, bv: Option<f64>, nv: Option<f64>, floor| FigureDelta {
            figure,
            base: bv,
            new: nv,
            better,
            regressed: worse(better, bv, nv, o.tolerance, floor),
        };
        steps.push(StepDelta {
            model: b.model,
            load: b.load(),
            base_step: b.step,
            new_step: n.step,
            figures: vec![
                fig(
                    "throughput_rps",
                    Better::Higher,
                    Some(b.throughput_rps),
                    Some(n.throughput_rps),
                    0.0,
                ),
                fig(
                    "p50_ms",
                    Better::Lower,
                    b.p50_ms,
                    n.p50_ms,
                    o.latency_floor_ms,
                ),
                fig(
                    "p99_ms",
                    Better::Lower,
                    b.p99_ms,
                    n.p99_ms,
                    o.latency_floor_ms,
                ),
                fig(
                    "error_rate",
                    Better::Lower,
                    Some(b.error_rate),
                    Some(n.error_rate),
                    o.error_rate_floor,
                ),
                fig(
                    "anomalies",
                    Better::Lower,
                    Some(b.anomalies() as f64),
                    Some(n.anomalies() as f64),
                    0.0,
                ),
            ],
        });
    }
    let only_in_new = ns
        .iter()
        .filter(|n| find(&bs, key(n)).is_none())
        .map(StepSummary::load)
        .collect();

    let (bk, nk) = (base.1, new.1);
    let bf = bk.failure_point.as_ref().map(|f| f.load);
    let nf = nk.failure_point.as_ref().map(|f| f.load);
    let base_max_load = bs
        .iter()
        .map(StepSummary::load)
        .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.max(l))));
    let failure_regressed = match (bf, nf) {
        (Some(b), Some(n)) => n < b,
        (None, Some(n)) => base_max_load.is_some_and(|m| n <= m),
        _ => false,
    };
    let knee = vec![
        FigureDelta {
            figure: "max_sustainable",
            base: bk.max_sustainable,
            new: nk.max_sustainable,
            better: Better::Higher,
            regressed: worse(
                Better::Higher,
                bk.max_sustainable,
                nk.max_sustainable,
                o.tolerance,
                0.0,
            ),
        },
        FigureDelta {
            figure: "peak_throughput_rps",
            base: bk.peak_throughput_rps,
            new: nk.peak_throughput_rps,
            better: Better::Higher,
            regressed: worse(
                Better::Higher,
                bk.peak_throughput_rps,
                nk.peak_throughput_rps,
                o.tolerance,
                0.0,
            ),
        },
        FigureDelta {
            figure: "failure_point",
            base: bf,
            new: nf,
            better: Better::Higher,
            regressed: failure_regressed,
        },
    ];
    let bound = |v: &[StepSummary]| -> Vec<u32> {
        v.iter()
            .filter(|s| s.generator_bound)
            .map(|s| s.step)
            .collect()
    };
    Comparison {
        tolerance: o.tolerance,
        steps,
        only_in_base,
        only_in_new,
        knee,
        base_generator_bound: bound(&bs),
        new_generator_bound: bound(&ns),
    }
}
