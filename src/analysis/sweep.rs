//! A sweep judged as it runs: each finished step against the step before it and the stop
//! criteria, and the knee of every step so far. The engine asks after every step, so the
//! decision to stop a sweep is made here, not by whoever writes the results down.

use super::knee::Knee;
use super::verdict::{StopCriteria, Tripped, judge};
use crate::metrics::{Stats, StepFacts, StepSummary, Verdict};
use std::collections::BTreeMap;

/// A finished step with its verdict.
#[derive(Clone, Debug)]
pub struct JudgedStep {
    /// The step's row, its verdict set.
    pub figures: StepSummary,
    /// The stop criteria it tripped (empty unless it failed).
    pub tripped: Vec<Tripped>,
    /// Its error responses by JSON-RPC error code.
    pub errors_by_code: BTreeMap<i64, u64>,
    /// The knee of the sweep up to and including this step.
    pub knee: Knee,
}

impl JudgedStep {
    /// Whether the sweep must stop here: a failed step ends it.
    pub fn stop(&self) -> bool {
        self.figures.verdict == Verdict::Failed
    }
}

/// The judge of one sweep: remembers the steps judged so far.
#[derive(Debug)]
pub struct SweepJudge {
    criteria: StopCriteria,
    steps: Vec<StepSummary>,
}

impl SweepJudge {
    pub fn new(criteria: StopCriteria) -> Self {
        SweepJudge {
            criteria,
            steps: Vec::new(),
        }
    }

    /// Builds the row of a finished step from its merged stats and judges it.
    pub fn judge(&mut self, facts: StepFacts, stats: &Stats) -> JudgedStep {
        let mut figures = StepSummary::new(facts, stats);
        let judgement = judge(&figures, self.steps.last(), &self.criteria);
        figures.verdict = judgement.verdict;
        self.steps.push(figures.clone());
        JudgedStep {
            figures,
            tripped: judgement.tripped,
            errors_by_code: stats.counters.errors_by_code.clone(),
            knee: Knee::of(&self.steps, &self.criteria),
        }
    }
}
