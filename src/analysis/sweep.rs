//! A sweep judged as it runs: each finished step against the step before it and the stop
//! criteria, and the knee of every step so far. The engine asks after every step, so the
//! decision to stop a sweep is made here, not by whoever writes the results down.

use super::knee::Knee;
use super::verdict::{StopCriteria, Tripped, judge};
use crate::metrics::{
    ByKind, Finding, FlowSummary, OpSummary, RetriesByCause, ScenarioNames, ScenarioSummary, Stats,
    StepFacts, StepSummary, Verdict,
};
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
    /// Its retries by cause (`figures.retries` is their sum).
    pub retries_by_cause: RetriesByCause,
    /// The knee of the sweep up to and including this step.
    pub knee: Knee,
    /// Per operation, and what belongs to none (ops.csv).
    pub ops: Vec<OpSummary>,
    /// Per scenario and scenario step (scenarios.csv); empty without scenarios.
    pub scenarios: Vec<ScenarioSummary>,
    /// Tasks and input rounds, whole (summary.json); none without them.
    pub flows: Option<FlowSummary>,
    /// The first findings of the scenarios' `tally` steps, each with this step's number.
    pub findings: Vec<Finding>,
    /// Its `input_unanswered` and `input_refused` by kind of input.
    pub input_unanswered_by_kind: ByKind,
    pub input_refused_by_kind: ByKind,
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
    /// The operations' names, by operation number.
    op_names: Vec<String>,
    /// The scenarios' names and their steps', by scenario number.
    scenario_names: Vec<ScenarioNames>,
}

impl SweepJudge {
    pub fn new(criteria: StopCriteria) -> Self {
        SweepJudge {
            criteria,
            steps: Vec::new(),
            op_names: Vec::new(),
            scenario_names: Vec::new(),
        }
    }

    /// Names the scenarios (by scenario number) and their steps in the steps' scenario rows.
    pub fn naming_scenarios(mut self, names: Vec<ScenarioNames>) -> Self {
        self.scenario_names = names;
        self
    }

    /// Names the operations (by operation number) in the steps' per-operation rows.
    pub fn naming_ops(mut self, names: Vec<String>) -> Self {
        self.op_names = names;
        self
    }

    /// Builds the row of a finished step from its merged stats and judges it.
    pub fn judge(&mut self, facts: StepFacts, stats: &Stats) -> JudgedStep {
        let mut figures = StepSummary::new(facts, stats);
        // With scenarios, the unit judged is the iteration (docs/metrics.md).
        let mut judged = figures.judged();
        let judgement = judge(&judged, self.steps.last(), &self.criteria);
        figures.verdict = judgement.verdict;
        judged.verdict = judgement.verdict;
        self.steps.push(judged);
        let ops = OpSummary::rows(&figures, stats, &self.op_names);
        let scenarios = ScenarioSummary::rows(&figures, &stats.scenarios, &self.scenario_names);
        let findings = stats
            .scenarios
            .iter()
            .flat_map(|sc| &sc.tallies.findings)
            .map(|f| Finding {
                step: Some(figures.step),
                ..f.clone()
            })
            .collect();
        JudgedStep {
            figures,
            tripped: judgement.tripped,
            errors_by_code: stats.counters.errors_by_code.clone(),
            retries_by_cause: RetriesByCause::of(&stats.counters),
            knee: Knee::of(&self.steps, &self.criteria),
            ops,
            scenarios,
            flows: stats.flows.as_deref().map(FlowSummary::of),
            findings,
            input_unanswered_by_kind: stats.counters.input_unanswered_by_kind,
            input_refused_by_kind: stats.counters.input_refused_by_kind,
        }
    }
}
