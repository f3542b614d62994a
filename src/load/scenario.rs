//! Scenarios compiled for the agreed revision: each step's calls rendered like the mix's
//! operations (with the iteration's variables and CSV row), its captures, conditions and
//! assertions parsed, its think times ready to draw. A mix entry in a profile that has
//! scenarios becomes a one-step scenario.

use super::mix::{CsvData, MixOp};
use super::template::Rng;
use crate::metrics::ScenarioNames;
use crate::profile::expr::{Expr, Path};
use std::sync::Arc;
use std::time::Duration;

/// Every scenario of a run with its cumulative weights.
#[derive(Debug)]
pub struct Scenarios {
    pub list: Vec<Scenario>,
    cumulative: Vec<f64>,
}

impl Scenarios {
    pub fn new(list: Vec<Scenario>) -> Result<Self, String> {
        if list.is_empty() {
            return Err("no scenario".into());
        }
        let mut acc = 0.0;
        let cumulative = list
            .iter()
            .map(|s| {
                acc += s.weight;
                acc
            })
            .collect();
        Ok(Scenarios { list, cumulative })
    }

    /// The names each scenario and its steps report under.
    pub fn names(&self) -> Vec<ScenarioNames> {
        self.list
            .iter()
            .map(|s| ScenarioNames {
                scenario: s.name.clone(),
                steps: s.steps.iter().map(|st| st.name.clone()).collect(),
            })
            .collect()
    }

    /// Draws a scenario's number by weight.
    pub fn pick(&self, rng: &mut Rng) -> usize {
        if self.list.len() == 1 {
            return 0;
        }
        let total = *self.cumulative.last().expect("non-empty");
        let x = rng.unit() * total;
        self.cumulative
            .partition_point(|c| *c <= x)
            .min(self.list.len() - 1)
    }
}

/// One scenario: what a virtual user does in one iteration.
#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub weight: f64,
    /// One row per iteration, for `{{csv:COLUMN}}` in any of its calls.
    pub csv: Option<Arc<CsvData>>,
    pub steps: Vec<Step>,
    /// Whether any step polls (then polls per iteration are recorded).
    pub polls: bool,
}

#[derive(Debug)]
pub struct Step {
    pub name: String,
    pub kind: StepKind,
}

#[derive(Debug)]
pub enum StepKind {
    Call(Call),
    Poll(Poll),
    /// Calls in flight at once; the step ends when all have settled.
    Parallel(Vec<Call>),
    /// Assertions over the iteration's variables, each with its text.
    Expect(Vec<Check>),
    Think(Think),
}

/// One request of a step and what it takes out of the answer.
#[derive(Debug)]
pub struct Call {
    pub op: MixOp,
    pub captures: Vec<Capture>,
}

#[derive(Debug)]
pub struct Capture {
    pub var: String,
    pub path: Path,
}

#[derive(Debug)]
pub struct Poll {
    pub call: Call,
    pub until: Check,
    pub interval: Duration,
    /// Wait as long as the answer's `pollInterval` (milliseconds) says, when it says.
    pub server_interval: bool,
    pub max_polls: Option<u32>,
    pub max_time: Option<Duration>,
}

/// An expression with the text it was written as (for reasons in reports).
#[derive(Debug)]
pub struct Check {
    pub text: String,
    pub expr: Expr,
}

/// A pause: fixed, uniform between two bounds, or exponential around a mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Think {
    Fixed(Duration),
    Uniform(Duration, Duration),
    Exponential(Duration),
}

impl Think {
    pub fn draw(self, rng: &mut Rng) -> Duration {
        match self {
            Think::Fixed(d) => d,
            Think::Uniform(a, b) => a + (b.saturating_sub(a)).mul_f64(rng.unit()),
            // 1 - u is in (0, 1], so the logarithm is finite.
            Think::Exponential(mean) => mean.mul_f64(-(1.0 - rng.unit()).ln()),
        }
    }
}
