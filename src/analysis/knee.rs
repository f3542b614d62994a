//! The knee of a sweep (docs/metrics.md): where more load stopped buying throughput, where the
//! server failed, the highest load it sustained, its peak throughput, and the USL fit.

use super::usl::{UslFit, fit_usl};
use super::verdict::{StopCriteria, Tripped, tripped};
use crate::metrics::{Model, StepSummary, Verdict};
use serde::{Deserialize, Serialize};

/// The first failed step: its load and every criterion it tripped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailurePoint {
    pub step: u32,
    pub load: f64,
    pub tripped: Vec<Tripped>,
}

/// Where a sweep saturates and fails. Loads are concurrency (closed loop) or target rate in
/// requests per second (open loop), as `model` says. Each figure is `None` (`null` in
/// summary.json) where the sweep did not reach it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The model of the steps the knee was computed over; `None` when there were none.
    pub model: Option<Model>,
    /// The load of the step just before the first `saturated` step.
    pub saturation_point: Option<f64>,
    /// The step at `saturation_point`.
    pub saturation_step: Option<u32>,
    /// The first `failed` step.
    pub failure_point: Option<FailurePoint>,
    /// The highest load below the failure point (or of the whole sweep, when nothing failed)
    /// whose step did not fail.
    pub max_sustainable: Option<f64>,
    /// The step at `max_sustainable`.
    pub max_sustainable_step: Option<u32>,
    /// The highest `throughput_rps` of any step (the first such step on a tie).
    pub peak_throughput_rps: Option<f64>,
    /// The step at `peak_throughput_rps`.
    pub peak_step: Option<u32>,
    /// The Universal Scalability Law fitted over the closed-loop steps that did not fail
    /// (three or more needed).
    pub usl: Option<UslFit>,
    /// The steps where the knee put its saturation (the first saturated step) or its failure
    /// that the generator itself limited (`generator_bound`): there the knee describes
    /// mcpload, not the server.
    #[serde(default)]
    pub generator_limited: Vec<u32>,
}

impl Knee {
    /// Computes the knee over steps judged (their `verdict` set) with `criteria`, which name
    /// what tripped at the failure point. Steps cut short by an interruption are left out,
    /// and when a run mixes models only the steps of the first step's model count.
    pub fn of(steps: &[StepSummary], criteria: &StopCriteria) -> Knee {
        let Some(model) = steps.iter().find(|s| !s.interrupted).map(|s| s.model) else {
            return Knee::default();
        };
        let steps: Vec<&StepSummary> = steps
            .iter()
            .filter(|s| !s.interrupted && s.model == model)
            .collect();

        let (saturation_point, saturation_step) = steps
            .iter()
            .position(|s| s.verdict == Verdict::Saturated)
            .and_then(|i| i.checked_sub(1))
            .map(|i| (Some(steps[i].load()), Some(steps[i].step)))
            .unwrap_or_default();

        let failure_point = steps
            .iter()
            .find(|s| s.verdict == Verdict::Failed)
            .map(|s| FailurePoint {
                step: s.step,
                load: s.load(),
                tripped: tripped(s, criteria),
            });
        let below_failure = |s: &&&StepSummary| {
            failure_point
                .as_ref()
                .is_none_or(|f| s.load() < f.load && s.step < f.step)
        };
        let sustainable = steps
            .iter()
            .filter(below_failure)
            .filter(|s| s.verdict != Verdict::Failed)
            .max_by(|a, b| a.load().total_cmp(&b.load()));

        // On a tie the first (lowest-load) step holds the peak.
        let peak = steps
            .iter()
            .rev()
            .max_by(|a, b| a.throughput_rps.total_cmp(&b.throughput_rps));

        let usl_points: Vec<(f64, f64)> = steps
            .iter()
            .filter(|s| s.model == Model::Closed && s.verdict != Verdict::Failed)
            .map(|s| (s.load(), s.throughput_rps))
            .collect();

        let first_saturated = steps.iter().find(|s| s.verdict == Verdict::Saturated);
        let failed = steps.iter().find(|s| s.verdict == Verdict::Failed);
        let mut generator_limited: Vec<u32> = [first_saturated, failed]
            .into_iter()
            .flatten()
            .filter(|s| s.generator_bound)
            .map(|s| s.step)
            .collect();
        generator_limited.dedup();

        Knee {
            model: Some(model),
            saturation_point,
            saturation_step,
            failure_point,
            max_sustainable: sustainable.map(|s| s.load()),
            max_sustainable_step: sustainable.map(|s| s.step),
            peak_throughput_rps: peak.map(|s| s.throughput_rps),
            peak_step: peak.map(|s| s.step),
            usl: fit_usl(&usl_points),
            generator_limited,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{StopCriteria, judge};
    use crate::metrics::{Stats, StepFacts};

    /// A judged closed-loop sweep from (concurrency, ok responses per second, failures).
    fn sweep(points: &[(u64, u64, u64)]) -> Vec<StepSummary> {
        let mut out: Vec<StepSummary> = Vec::new();
        for (i, &(c, ok, failed)) in points.iter().enumerate() {
            let mut stats = Stats::default();
            stats.counters.requests = ok + failed;
            stats.counters.responses = ok;
            stats.counters.ok = ok;
            stats.counters.http_429 = failed;
            let mut s = StepSummary::new(StepFacts::closed(i as u32 + 1, c, 1.0), &stats);
            s.verdict = judge(&s, out.last(), &StopCriteria::default()).verdict;
            out.push(s);
        }
        out
    }

    #[test]
    fn a_sweep_that_saturates_then_fails() {
        let steps = sweep(&[
            (1, 100, 0),
            (2, 199, 0),
            (4, 390, 0),
            (8, 398, 0),
            (16, 405, 0),
            (32, 236, 164),
        ]);
        let v: Vec<Verdict> = steps.iter().map(|s| s.verdict).collect();
        use Verdict::*;
        assert_eq!(v, [Ok, Ok, Ok, Saturated, Saturated, Failed]);
        let k = Knee::of(&steps, &StopCriteria::default());
        assert_eq!(k.model, Some(Model::Closed));
        assert_eq!(k.saturation_point, Some(4.0));
        assert_eq!(k.saturation_step, Some(3));
        assert_eq!(k.failure_point.as_ref().map(|f| f.load), Some(32.0));
        assert_eq!(k.max_sustainable, Some(16.0));
        assert_eq!(k.peak_throughput_rps, Some(405.0));
        assert_eq!(k.peak_step, Some(5));
        let usl = k.usl.expect("five non-failed closed-loop steps");
        assert_eq!(usl.points, 5);
        assert!(usl.peak_throughput_rps.unwrap() > 380.0, "{usl:?}");
    }

    #[test]
    fn a_sweep_that_never_saturates_nor_fails() {
        let steps = sweep(&[(1, 100, 0), (2, 200, 0), (4, 400, 0)]);
        let k = Knee::of(&steps, &StopCriteria::default());
        assert_eq!(k.saturation_point, None);
        assert!(k.failure_point.is_none());
        assert_eq!(k.max_sustainable, Some(4.0));
        let usl = k.usl.unwrap();
        assert!((usl.lambda - 100.0).abs() < 1e-6, "{usl:?}");
    }

    #[test]
    fn failing_from_the_first_step_sustains_nothing() {
        let steps = sweep(&[(4, 10, 90)]);
        let k = Knee::of(&steps, &StopCriteria::default());
        assert_eq!(k.failure_point.as_ref().map(|f| f.step), Some(1));
        assert_eq!(k.max_sustainable, None);
        assert!(k.usl.is_none());
    }

    #[test]
    fn interrupted_steps_do_not_count() {
        let mut steps = sweep(&[(1, 100, 0), (2, 200, 0), (4, 10, 90)]);
        steps[2].interrupted = true;
        let k = Knee::of(&steps, &StopCriteria::default());
        assert!(k.failure_point.is_none());
        assert_eq!(k.max_sustainable, Some(2.0));
        assert!(Knee::of(&[], &StopCriteria::default()).model.is_none());
    }

    #[test]
    fn the_failure_point_carries_what_tripped() {
        let steps = sweep(&[(1, 100, 0), (2, 50, 50)]);
        let t = judge(&steps[1], Some(&steps[0]), &StopCriteria::default()).tripped;
        let k = Knee::of(&steps, &StopCriteria::default());
        assert_eq!(k.failure_point.unwrap().tripped, t);
    }
}
