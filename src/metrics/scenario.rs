//! What scenario iterations measured: per scenario, iterations started, completed, failed and
//! interrupted, their latency, polls per iteration and the named reasons they failed; per
//! scenario step (a "part"), the same for that step alone (a parallel step's join latency, a
//! poll's time to its terminal state). The rows of scenarios.csv.

use super::LatencyHistogram;
use super::correctness::Tallies;
use super::summary::{CountPercentiles, Model, Percentiles, StepSummary, per_second, share};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::AddAssign;
use std::time::Duration;

/// scenarios.csv's `part` of the row that covers whole iterations.
pub const WHOLE: &str = "*";

/// How iterations (or one step of them) went.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunCounts {
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    /// Still running when the step's graceful stop ran out.
    pub interrupted: u64,
    /// From the scheduled start to the end (open loop: coordinated omission corrected).
    #[serde(skip)]
    pub latency: LatencyHistogram,
    /// Polls per iteration (or per run of a poll step); empty when nothing polls.
    #[serde(skip, default = "super::count_histogram")]
    pub polls: Histogram<u64>,
    /// Failures by named reason, e.g. `capture job_id: path not found`.
    pub failures: BTreeMap<String, u64>,
}

impl Default for RunCounts {
    fn default() -> Self {
        RunCounts {
            started: 0,
            completed: 0,
            failed: 0,
            interrupted: 0,
            latency: LatencyHistogram::default(),
            polls: super::count_histogram(),
            failures: BTreeMap::new(),
        }
    }
}

impl RunCounts {
    /// One run that ended well after `took`.
    pub fn completed(&mut self, took: Duration) {
        self.completed += 1;
        self.latency.record(took);
    }

    /// One run that failed for `reason`.
    pub fn failed(&mut self, reason: &str) {
        self.failed += 1;
        match self.failures.get_mut(reason) {
            Some(n) => *n += 1,
            None => {
                self.failures.insert(reason.to_owned(), 1);
            }
        }
    }

    pub fn polled(&mut self, polls: u64) {
        let _ = self.polls.record(polls);
    }

    /// Runs completed per second over a step of `duration_s`.
    pub fn completed_per_s(&self, duration_s: f64) -> f64 {
        per_second(self.completed, duration_s)
    }

    /// `failed / started`; 0 when none started.
    pub fn error_rate(&self) -> f64 {
        share(self.failed, self.started)
    }
}

impl AddAssign<&RunCounts> for RunCounts {
    fn add_assign(&mut self, o: &RunCounts) {
        self.started += o.started;
        self.completed += o.completed;
        self.failed += o.failed;
        self.interrupted += o.interrupted;
        self.latency += &o.latency;
        let _ = self.polls.add(&o.polls);
        for (k, n) in &o.failures {
            *self.failures.entry(k.clone()).or_default() += n;
        }
    }
}

/// One scenario's figures in one step: whole iterations, each of its steps, and what its
/// `tally` steps counted.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScenarioStats {
    pub iterations: RunCounts,
    /// By scenario step, in the scenario's order.
    pub parts: Vec<RunCounts>,
    pub tallies: Tallies,
}

impl ScenarioStats {
    pub fn part_mut(&mut self, i: usize) -> &mut RunCounts {
        super::grown(&mut self.parts, i)
    }
}

impl AddAssign<&ScenarioStats> for ScenarioStats {
    fn add_assign(&mut self, o: &ScenarioStats) {
        self.iterations += &o.iterations;
        for (i, p) in o.parts.iter().enumerate() {
            *self.part_mut(i) += p;
        }
        self.tallies += &o.tallies;
    }
}

/// The names a run's scenarios report under: each scenario's, and its steps'.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioNames {
    pub scenario: String,
    pub steps: Vec<String>,
}

/// One row of scenarios.csv (docs/results.md): a scenario's whole iterations (`part` is
/// [`WHOLE`]) or one of its steps, in one step of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSummary {
    pub step: u32,
    pub scenario: String,
    pub part: String,
    pub model: Model,
    pub concurrency: Option<u64>,
    pub target_rate: Option<f64>,
    pub duration_s: f64,
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    pub interrupted: u64,
    /// `completed` per second.
    pub completed_per_s: f64,
    /// `failed / started`; 0 when none started.
    pub error_rate: f64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    /// Polls per iteration (per run of the step, on a poll step's row).
    pub polls_p50: Option<u64>,
    pub polls_p99: Option<u64>,
    pub polls_max: Option<u64>,
    pub polls_mean: Option<f64>,
    /// Failures whose reason is a failed `expect` assertion.
    pub assertion_failures: u64,
    /// Every failure reason with its count; written `reason (n); reason (n)`.
    pub failure_reasons: FailureReasons,
}

/// Failures by named reason with their counts. In scenarios.csv and summary.json the text
/// `reason (n); reason (n)`, sorted by reason, empty when nothing failed; read back from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct FailureReasons(pub BTreeMap<String, u64>);

impl fmt::Display for FailureReasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (reason, n)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{reason} ({n})")?;
        }
        Ok(())
    }
}

impl From<FailureReasons> for String {
    fn from(r: FailureReasons) -> String {
        r.to_string()
    }
}

impl From<String> for FailureReasons {
    fn from(text: String) -> Self {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        // A reason may hold "; " itself: a piece ends a reason only where "(n)" closes it.
        let mut reason = String::new();
        for piece in text.split("; ") {
            if !reason.is_empty() {
                reason.push_str("; ");
            }
            reason.push_str(piece);
            let count = reason
                .strip_suffix(')')
                .and_then(|t| t.rsplit_once(" ("))
                .and_then(|(text, n)| Some((text.to_owned(), n.parse::<u64>().ok()?)));
            if let Some((text, n)) = count {
                *counts.entry(text).or_default() += n;
                reason.clear();
            }
        }
        FailureReasons(counts)
    }
}

/// The prefix of every failure reason that is a failed `expect` assertion.
pub const EXPECT_PREFIX: &str = "expect ";

impl ScenarioSummary {
    /// The rows of one sweep step: per scenario, the whole-iteration row then one per step.
    pub fn rows(
        step: &StepSummary,
        stats: &[ScenarioStats],
        names: &[ScenarioNames],
    ) -> Vec<ScenarioSummary> {
        let mut out = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let empty = ScenarioStats::default();
            let s = stats.get(i).unwrap_or(&empty);
            out.push(Self::new(step, &n.scenario, WHOLE, &s.iterations));
            let none = RunCounts::default();
            for (j, part) in n.steps.iter().enumerate() {
                let p = s.parts.get(j).unwrap_or(&none);
                out.push(Self::new(step, &n.scenario, part, p));
            }
        }
        out
    }

    fn new(step: &StepSummary, scenario: &str, part: &str, c: &RunCounts) -> Self {
        let lat = Percentiles::of(&c.latency);
        let polls = CountPercentiles::of(&c.polls);
        ScenarioSummary {
            step: step.step,
            scenario: scenario.to_owned(),
            part: part.to_owned(),
            model: step.model,
            concurrency: step.concurrency,
            target_rate: step.target_rate,
            duration_s: step.duration_s,
            started: c.started,
            completed: c.completed,
            failed: c.failed,
            interrupted: c.interrupted,
            completed_per_s: c.completed_per_s(step.duration_s),
            error_rate: c.error_rate(),
            p50_ms: lat.p50,
            p90_ms: lat.p90,
            p99_ms: lat.p99,
            p999_ms: lat.p999,
            max_ms: lat.max,
            mean_ms: lat.mean,
            polls_p50: polls.p50,
            polls_p99: polls.p99,
            polls_max: polls.max,
            polls_mean: polls.mean,
            assertion_failures: c
                .failures
                .iter()
                .filter(|(r, _)| r.starts_with(EXPECT_PREFIX))
                .map(|(_, n)| n)
                .sum(),
            failure_reasons: FailureReasons(c.failures.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_reasons_read_back_as_written() {
        let reasons = FailureReasons(BTreeMap::from([
            ("capture id: path not found".to_owned(), 2),
            ("expect a; b (x)".to_owned(), 1),
        ]));
        let text = reasons.to_string();
        assert_eq!(text, "capture id: path not found (2); expect a; b (x) (1)");
        assert_eq!(FailureReasons::from(text), reasons);
        assert_eq!(
            FailureReasons::from(String::new()),
            FailureReasons::default()
        );
        assert_eq!(
            serde_json::to_value(&reasons).unwrap(),
            serde_json::json!(reasons.to_string())
        );
    }
}
