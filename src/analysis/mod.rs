//! Judging measured steps (docs/metrics.md "The knee"): the verdict of each step against the stop
//! criteria (step by step while a sweep runs), the knee of a sweep, the Universal Scalability
//! Law fit, the comparison of two runs, the threshold gates CI uses for its exit code, and the
//! soak checks (docs/checks.md) over sampled series. Pure functions over [`StepSummary`] rows
//! and plain slices: nothing here reads files or prints.
//!
//! [`StepSummary`]: crate::metrics::StepSummary

pub mod ab;
pub mod checks;
mod compare;
pub mod fleet;
mod gates;
mod knee;
pub mod stats;
mod sweep;
mod usl;
mod verdict;

pub use compare::{Better, CompareOptions, Comparison, FigureDelta, StepDelta, compare};
pub use gates::{GateError, GateResult, Op, RunFigures, Selector, Threshold, Thresholds, distinct};
pub use knee::{FailurePoint, Knee};
pub use sweep::{JudgedStep, SweepJudge};
pub use usl::{UslFit, fit_usl};
pub use verdict::{
    Cause, Judgement, OPEN_LOOP_SATURATION, SATURATION_GAIN, SATURATION_LOAD_RISE, StopCriteria,
    Tripped, judge, pct, saturated, tripped,
};

use crate::metrics::{OpSummary, ScenarioNames, ScenarioSummary, Stats, StepFacts, StepSummary};

/// A step with nothing measured: a sample of the row type for column names.
pub(crate) fn blank_step() -> StepSummary {
    StepSummary::new(StepFacts::closed(0, 0, 0.0), &Stats::default())
}

/// An ops.csv row with nothing measured (the `-` row of an empty step): a sample of the row
/// type for column names.
pub(crate) fn blank_op_row() -> OpSummary {
    let mut rows = OpSummary::rows(&blank_step(), &Stats::default(), &[]);
    rows.remove(0)
}

/// A scenarios.csv row with nothing measured: a sample of the row type for column names.
pub(crate) fn blank_scenario_row() -> ScenarioSummary {
    let mut rows = ScenarioSummary::rows(&blank_step(), &[], &[ScenarioNames::default()]);
    rows.remove(0)
}
