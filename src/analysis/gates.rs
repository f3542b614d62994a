//! Threshold gates for CI: `p99_ms<250`, `error_rate<0.001`, `anomalies==0`, parsed with clear
//! errors and evaluated over a run's steps and knee. A step metric must hold in every step; a
//! knee metric is checked once.

use super::knee::Knee;
use crate::metrics::StepSummary;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A comparison operator of a threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    /// Longest first, so `<=` is not read as `<`.
    const ALL: [(&'static str, Op); 6] = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];

    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Lt => value < limit,
            Op::Le => value <= limit,
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
            Op::Eq => value == limit,
            Op::Ne => value != limit,
        }
    }

    fn as_str(self) -> &'static str {
        Op::ALL
            .iter()
            .find(|(_, o)| *o == self)
            .map_or("?", |(s, _)| s)
    }
}

/// Why a threshold could not be parsed (a usage error: exit code 2).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GateError {
    #[error("empty threshold: expected METRIC OP VALUE, as in 'p99_ms<250'")]
    Empty,
    #[error("threshold '{0}': '=' is not an operator; did you mean '=='?")]
    SingleEquals(String),
    #[error(
        "threshold '{0}': no comparison operator; expected one of <, <=, >, >=, ==, != as in 'p99_ms<250'"
    )]
    NoOperator(String),
    #[error("threshold '{text}': unknown metric '{metric}'; known metrics: {known}")]
    UnknownMetric {
        text: String,
        metric: String,
        known: String,
    },
    #[error("threshold '{text}': '{value}' is not a number (a fraction like 0.001 or 0.1%)")]
    BadNumber { text: String, value: String },
}

/// Metrics of the run as a whole, checked once against the knee.
const KNEE_METRICS: [&str; 2] = ["max_sustainable", "peak_throughput_rps"];
/// Step metrics derived from columns: `anomalies` (docs/metrics.md's sum) and `rejected`
/// (`http_429 + http_503`).
const DERIVED_METRICS: [&str; 2] = ["anomalies", "rejected"];

/// A step's numeric columns by name, as serde names them (so every numeric column of
/// steps.csv is a metric, and a column added later is one too).
fn step_values(s: &StepSummary) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// Every metric a threshold may name: the numeric columns of steps.csv, the derived step
/// metrics, and the knee metrics.
fn known_metrics() -> Vec<String> {
    let mut out: Vec<String> = step_values(&super::blank_step())
        .into_iter()
        .filter(|(k, v)| k != "step" && (v.is_number() || v.is_null()))
        .map(|(k, _)| k)
        .collect();
    out.extend(
        DERIVED_METRICS
            .iter()
            .chain(&KNEE_METRICS)
            .map(|s| s.to_string()),
    );
    out
}

/// One gate: `metric op value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Threshold {
    pub metric: String,
    pub op: Op,
    pub value: f64,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.metric, self.op.as_str(), self.value)
    }
}

impl From<Threshold> for String {
    fn from(t: Threshold) -> String {
        t.to_string()
    }
}

impl TryFrom<String> for Threshold {
    type Error = GateError;
    fn try_from(s: String) -> Result<Self, GateError> {
        s.parse()
    }
}

impl FromStr for Threshold {
    type Err = GateError;

    /// Parses `METRIC OP VALUE` (spaces allowed around each part). VALUE is a number, or a
    /// percentage such as `0.1%` (= 0.001).
    fn from_str(text: &str) -> Result<Self, GateError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(GateError::Empty);
        }
        let found = Op::ALL
            .iter()
            .filter_map(|&(sym, op)| t.find(sym).map(|at| (at, sym, op)))
            .min_by_key(|&(at, sym, _)| (at, usize::MAX - sym.len()));
        let Some((at, sym, op)) = found else {
            return Err(if t.contains('=') {
                GateError::SingleEquals(t.to_owned())
            } else {
                GateError::NoOperator(t.to_owned())
            });
        };
        let metric = t[..at].trim();
        let raw = t[at + sym.len()..].trim();
        let known = known_metrics();
        if !known.iter().any(|k| k == metric) {
            return Err(GateError::UnknownMetric {
                text: t.to_owned(),
                metric: metric.to_owned(),
                known: known.join(", "),
            });
        }
        let bad = || GateError::BadNumber {
            text: t.to_owned(),
            value: raw.to_owned(),
        };
        let value = match raw.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
            None => raw.parse::<f64>().map_err(|_| bad())?,
        };
        if !value.is_finite() {
            return Err(bad());
        }
        Ok(Threshold {
            metric: metric.to_owned(),
            op,
            value,
        })
    }
}

/// The outcome of one threshold on one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    /// The threshold as written canonically, e.g. `p99_ms<250`.
    pub threshold: String,
    pub holds: bool,
    /// Steps where a step metric failed (empty for knee metrics).
    pub failing_steps: Vec<u32>,
    /// The value furthest on the wrong side (or, when the gate holds, closest to its limit).
    pub worst: Option<f64>,
    /// One line for people, e.g. `p99_ms<250 fails in steps 4, 5 (worst 312.4 at step 5)`.
    pub detail: String,
}

impl Threshold {
    /// How far `v` lies on the failing side of the limit (bigger is worse).
    fn badness(&self, v: f64) -> f64 {
        match self.op {
            Op::Lt | Op::Le => v - self.value,
            Op::Gt | Op::Ge => self.value - v,
            Op::Eq | Op::Ne => (v - self.value).abs(),
        }
    }

    fn step_value(&self, s: &StepSummary) -> Option<f64> {
        match self.metric.as_str() {
            "anomalies" => Some(s.anomalies() as f64),
            "rejected" => Some(s.rejected() as f64),
            // No Retry-After without a rejection: nothing to wait for.
            "retry_after_max_s" => Some(s.retry_after_max_s.unwrap_or(0) as f64),
            m => step_values(s).get(m).and_then(serde_json::Value::as_f64),
        }
    }

    /// Evaluates this threshold on a run's steps (step metrics: every step must hold; an empty
    /// cell fails) or on its knee (knee metrics: an unreached figure fails).
    pub fn evaluate(&self, steps: &[StepSummary], knee: &Knee) -> GateResult {
        let name = self.to_string();
        if KNEE_METRICS.contains(&self.metric.as_str()) {
            let v = match self.metric.as_str() {
                "max_sustainable" => knee.max_sustainable,
                _ => knee.peak_throughput_rps,
            };
            let holds = v.is_some_and(|v| self.op.holds(v, self.value));
            let detail = match v {
                Some(v) => format!("{name} {}: {} is {v}", verdict(holds), self.metric),
                None => format!("{name} fails: the sweep reached no {}", self.metric),
            };
            return GateResult {
                threshold: name,
                holds,
                failing_steps: Vec::new(),
                worst: v,
                detail,
            };
        }
        if steps.is_empty() {
            return GateResult {
                detail: format!("{name} fails: no step was recorded"),
                threshold: name,
                holds: false,
                failing_steps: Vec::new(),
                worst: None,
            };
        }
        let mut failing = Vec::new();
        let mut empty = Vec::new();
        let mut worst: Option<(f64, u32)> = None;
        for s in steps {
            match self.step_value(s) {
                None => {
                    failing.push(s.step);
                    empty.push(s.step);
                }
                Some(v) => {
                    if !self.op.holds(v, self.value) {
                        failing.push(s.step);
                    }
                    if worst.is_none_or(|(w, _)| self.badness(v) > self.badness(w)) {
                        worst = Some((v, s.step));
                    }
                }
            }
        }
        let holds = failing.is_empty();
        let mut detail = if holds {
            format!("{name} holds in every step")
        } else {
            format!(
                "{name} fails in step{} {}",
                plural(&failing),
                list(&failing)
            )
        };
        if let Some((v, step)) = worst {
            detail.push_str(&format!(" (worst {v} at step {step})"));
        }
        if !empty.is_empty() {
            detail.push_str(&format!(
                "; {} is empty in step{} {}",
                self.metric,
                plural(&empty),
                list(&empty)
            ));
        }
        GateResult {
            threshold: name,
            holds,
            failing_steps: failing,
            worst: worst.map(|(v, _)| v),
            detail,
        }
    }
}

fn verdict(holds: bool) -> &'static str {
    if holds { "holds" } else { "fails" }
}

fn plural(v: &[u32]) -> &'static str {
    if v.len() == 1 { "" } else { "s" }
}

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// A set of thresholds, from a profile and `--threshold` flags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Thresholds(pub Vec<Threshold>);

impl Thresholds {
    /// Parses every expression; the first bad one is the error.
    pub fn parse<S: AsRef<str>>(exprs: &[S]) -> Result<Thresholds, GateError> {
        exprs
            .iter()
            .map(|e| e.as_ref().parse())
            .collect::<Result<_, _>>()
            .map(Thresholds)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Evaluates every threshold; the run passes when every result holds.
    pub fn evaluate(&self, steps: &[StepSummary], knee: &Knee) -> Vec<GateResult> {
        self.0.iter().map(|t| t.evaluate(steps, knee)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_operators_spaces_and_percentages() {
        let t: Threshold = " p99_ms <= 250 ".parse().unwrap();
        assert_eq!(
            (t.metric.as_str(), t.op, t.value),
            ("p99_ms", Op::Le, 250.0)
        );
        let t: Threshold = "error_rate<0.1%".parse().unwrap();
        assert_eq!((t.op, t.value), (Op::Lt, 0.001));
        let t: Threshold = "anomalies==0".parse().unwrap();
        assert_eq!(t.to_string(), "anomalies==0");
        let t: Threshold = "max_sustainable>=16".parse().unwrap();
        assert_eq!(t.op, Op::Ge);
        assert_eq!("rejected!=3".parse::<Threshold>().unwrap().op, Op::Ne);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!("  ".parse::<Threshold>(), Err(GateError::Empty));
        assert!(matches!(
            "anomalies=0".parse::<Threshold>(),
            Err(GateError::SingleEquals(_))
        ));
        assert!(matches!(
            "p99_ms 250".parse::<Threshold>(),
            Err(GateError::NoOperator(_))
        ));
        let e = "p99<250".parse::<Threshold>().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("unknown metric 'p99'"), "{msg}");
        assert!(msg.contains("p99_ms") && msg.contains("anomalies"), "{msg}");
        assert!(!msg.contains(" step,"), "step is no metric: {msg}");
        assert!(matches!(
            "p99_ms<fast".parse::<Threshold>(),
            Err(GateError::BadNumber { .. })
        ));
        assert!(matches!(
            "p99_ms<inf".parse::<Threshold>(),
            Err(GateError::BadNumber { .. })
        ));
        assert!(Thresholds::parse(&["p99_ms<1", "nope>1"]).is_err());
    }

    #[test]
    fn deserialises_from_profile_strings() {
        let t: Thresholds = serde_json::from_str(r#"["p99_ms<250", "anomalies==0"]"#).unwrap();
        assert_eq!(t.0.len(), 2);
        assert!(serde_json::from_str::<Thresholds>(r#"["p99<250"]"#).is_err());
    }
}
