//! Judging measured steps (docs/metrics.md "The knee"): the verdict of each step against the stop
//! criteria (step by step while a sweep runs), the knee of a sweep, the Universal Scalability
//! Law fit, the comparison of two runs, the threshold gates CI uses for its exit code, and the
//! soak checks (docs/checks.md) over sampled series. Pure functions over [`StepSummary`] rows
//! and plain slices: nothing here reads files or prints.
//!
//! [`StepSummary`]: crate::metrics::StepSummary

mod checks;
mod compare;
mod gates;
mod knee;
mod sweep;
mod usl;
mod verdict;

pub use checks::{
    COUNT_RECOVERY_FLOOR, CPU_BOUND_FRACTION, Check, CheckStatus, DEFAULT_COUNT_LIMIT_PER_MIN,
    DEFAULT_ERROR_MAX_RISE_PP, DEFAULT_LATENCY_MAX_RISE, DEFAULT_MEMORY_LIMIT_MIB_PER_MIN,
    DEFAULT_MIN_WINDOW_S, DEFAULT_SESSION_LIMIT_PER_MIN, ENVELOPE_WINDOW_S, LeakInput,
    MAX_SLOPE_POINTS, MEMORY_RECOVERY_FLOOR_MIB, RECOVERY_FRACTION, Slope, count_leak, cpu_ceiling,
    error_drift, generator, latency_drift, memory_leak, session_leak, theil_sen,
};
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
