//! Threshold gates for CI: `p99_ms<250`, `error_rate<0.001`, `anomalies==0`, and the same on
//! one operation or scenario through a label selector (`p99_ms{op=search}<300`,
//! `error_rate{scenario=jobs}<0.01`, `p99_ms{scenario=jobs,part=wait}<2000`), parsed with clear
//! errors and evaluated over a run's steps, their ops.csv and scenarios.csv rows, and its knee.
//! A step metric must hold in every step; a knee metric is checked once.

use super::checks::{Check, CheckStatus};
use super::knee::Knee;
use crate::metrics::{OpSummary, ScenarioSummary, StepSummary, WHOLE};
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
    #[error("threshold '{text}': unknown metric '{metric}'{of}; known metrics{of}: {known}")]
    UnknownMetric {
        text: String,
        metric: String,
        /// Which rows were meant: empty for steps, " of an operation", " of a scenario".
        of: &'static str,
        known: String,
    },
    #[error("threshold '{0}': '{{' is not closed; {SELECTOR_FORMS}")]
    UnclosedSelector(String),
    #[error("threshold '{text}': {why}; {SELECTOR_FORMS}")]
    BadSelector { text: String, why: String },
    #[error("threshold '{text}': '{value}' is not a number (a fraction like 0.001 or 0.1%)")]
    BadNumber { text: String, value: String },
    #[error("threshold '{text}': '{value}' is not a check status (pass, warn, fail, skipped)")]
    BadStatus { text: String, value: String },
}

/// What a selector may say, for its errors.
const SELECTOR_FORMS: &str = "a selector is {op=NAME}, {scenario=NAME}, {scenario=NAME,part=STEP} or, for `check`, {id=CHECK} (a NAME with , } or \" in it in double quotes)";

/// The labels a selector may hold.
const LABELS: [&str; 4] = ["op", "scenario", "part", "id"];

/// The metric of a check's gate, `check{id=memory_leak}!=fail`: its status compared with
/// `==` or `!=` against a word.
const CHECK_METRIC: &str = "check";

/// Which rows a threshold reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// No selector: steps.csv's rows, or the knee.
    Steps,
    /// `{op=NAME}`: the ops.csv rows of operation NAME (`-`: what belongs to no request).
    Op(String),
    /// `{scenario=NAME}`: its `*` rows (whole iterations); with `part=STEP`, that scenario
    /// step's rows.
    Scenario {
        scenario: String,
        part: Option<String>,
    },
    /// `{id=NAME}`: the soak check NAME of summary.json's `checks` (metric `check` only).
    Check(String),
}

impl Selector {
    /// Reads the text between `{` and `}`: `LABEL=VALUE` pairs separated by commas.
    fn parse(inner: &str) -> Result<Selector, String> {
        let mut op = None;
        let mut scenario = None;
        let mut part = None;
        let mut id = None;
        for (key, value) in labels(inner)? {
            let slot = match key.as_str() {
                "op" => &mut op,
                "scenario" => &mut scenario,
                "part" => &mut part,
                "id" => &mut id,
                _ => {
                    return Err(format!(
                        "unknown label '{key}' (labels: {})",
                        LABELS.join(", ")
                    ));
                }
            };
            if slot.replace(value).is_some() {
                return Err(format!("label '{key}' is given twice"));
            }
        }
        if let Some(id) = id {
            return match (op, scenario, part) {
                (None, None, None) => Ok(Selector::Check(id)),
                _ => Err("'id' names a check and goes with no other label".to_owned()),
            };
        }
        match (op, scenario, part) {
            (None, None, None) => Err("the selector is empty".to_owned()),
            (Some(op), None, None) => Ok(Selector::Op(op)),
            (Some(_), _, _) => Err("'op' goes with neither 'scenario' nor 'part'".to_owned()),
            (None, None, Some(_)) => Err("'part' needs a 'scenario'".to_owned()),
            (None, Some(scenario), part) => Ok(Selector::Scenario { scenario, part }),
        }
    }

    /// What an unknown metric's error says the rows are.
    fn rows_phrase(&self) -> &'static str {
        match self {
            Selector::Steps => "",
            Selector::Op(_) => " of an operation",
            Selector::Scenario { .. } => " of a scenario",
            Selector::Check(_) => " of a check",
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Steps => Ok(()),
            Selector::Op(op) => write!(f, "{{op={}}}", label_value(op)),
            Selector::Scenario { scenario, part } => {
                write!(f, "{{scenario={}", label_value(scenario))?;
                if let Some(p) = part {
                    write!(f, ",part={}", label_value(p))?;
                }
                f.write_str("}")
            }
            Selector::Check(id) => write!(f, "{{id={}}}", label_value(id)),
        }
    }
}

/// A label's value as written back: bare, or double-quoted (with `\"` and `\\`) when it
/// holds a character that ends or quotes a value, or spaces at either end.
fn label_value(v: &str) -> String {
    if v.trim() == v && !v.contains([',', '{', '}', '"', '\\', '=']) {
        return v.to_owned();
    }
    let escaped = v.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// The index of the `}` closing the `{` at `open` in `t`, quoted values skipped.
fn closing_brace(t: &str, open: usize) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in t[open + 1..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(open + 1 + i),
            _ => {}
        }
    }
    None
}

/// `LABEL=VALUE` pairs separated by commas; a value may be double-quoted, with `\"` and `\\`
/// inside.
fn labels(inner: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| format!("'{rest}' is no LABEL=VALUE"))?;
        let key = key.trim().to_owned();
        let after = after.trim_start();
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next().map(|(_, c)| c)),
                        '"' => {
                            end = Some(i + 1);
                            break;
                        }
                        c => value.push(c),
                    }
                }
                let end = end.ok_or_else(|| format!("the value of '{key}' has no closing '\"'"))?;
                (value, &quoted[end..])
            }
            None => {
                let end = after.find(',').unwrap_or(after.len());
                (after[..end].trim().to_owned(), &after[end..])
            }
        };
        if value.is_empty() {
            return Err(format!("label '{key}' has no value"));
        }
        let after = after.trim_start();
        rest = match after.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if after.is_empty() => after,
            None => {
                return Err(format!(
                    "'{after}' follows the value of '{key}'; labels are separated by ','"
                ));
            }
        };
        out.push((key, value));
    }
    Ok(out)
}

/// Metrics of the run as a whole, checked once against the knee.
const KNEE_METRICS: [&str; 2] = ["max_sustainable", "peak_throughput_rps"];
/// Step and operation metrics derived from columns: `anomalies` (docs/metrics.md's sum) and
/// `rejected` (`http_429 + http_503`).
const DERIVED_METRICS: [&str; 2] = ["anomalies", "rejected"];

/// A row's columns by name, as serde names them (so every numeric column of a CSV is a
/// metric, and a column added later is one too).
fn columns<R: Serialize>(row: &R) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(row) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// The numeric columns of a row type (those that may be empty too), `step` left out.
fn numeric_columns<R: Serialize>(sample: &R) -> impl Iterator<Item = String> {
    columns(sample)
        .into_iter()
        .filter(|(k, v)| k != "step" && (v.is_number() || v.is_null()))
        .map(|(k, _)| k)
}

/// Every metric a threshold with `selector` may name: without one, the numeric columns of
/// steps.csv, the derived step metrics, and the knee metrics; on an operation, the numeric
/// columns of ops.csv and the derived metrics; on a scenario, the numeric columns of
/// scenarios.csv.
fn known_metrics(selector: &Selector) -> Vec<String> {
    let derived = DERIVED_METRICS.iter().map(|s| s.to_string());
    match selector {
        Selector::Steps => numeric_columns(&super::blank_step())
            .chain(derived)
            .chain(KNEE_METRICS.iter().map(|s| s.to_string()))
            .collect(),
        Selector::Op(_) => numeric_columns(&super::blank_op_row())
            .chain(derived)
            .collect(),
        Selector::Scenario { .. } => numeric_columns(&super::blank_scenario_row()).collect(),
        Selector::Check(_) => vec![CHECK_METRIC.to_owned()],
    }
}

/// One gate: `metric{selector} op value`, the selector optional.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Threshold {
    pub metric: String,
    pub selector: Selector,
    pub op: Op,
    pub value: f64,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Selector::Check(_) = self.selector {
            let word = CheckStatus::ALL
                .get(self.value as usize)
                .map_or("?", |s| s.as_str());
            return write!(
                f,
                "{}{}{}{word}",
                self.metric,
                self.selector,
                self.op.as_str()
            );
        }
        write!(
            f,
            "{}{}{}{}",
            self.metric,
            self.selector,
            self.op.as_str(),
            self.value
        )
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

    /// Parses `METRIC OP VALUE` or `METRIC{SELECTOR} OP VALUE` (spaces allowed around each
    /// part). VALUE is a number, or a percentage such as `0.1%` (= 0.001).
    fn from_str(text: &str) -> Result<Self, GateError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(GateError::Empty);
        }
        // A `{` before any operator opens a selector; what follows its `}` is OP VALUE.
        let (head, selector, tail) = match t.find('{') {
            Some(open) if !t[..open].contains(['<', '>', '=', '!']) => {
                let close = closing_brace(t, open)
                    .ok_or_else(|| GateError::UnclosedSelector(t.to_owned()))?;
                let selector =
                    Selector::parse(&t[open + 1..close]).map_err(|why| GateError::BadSelector {
                        text: t.to_owned(),
                        why,
                    })?;
                (&t[..open], selector, &t[close + 1..])
            }
            _ => ("", Selector::Steps, t),
        };
        let found = Op::ALL
            .iter()
            .filter_map(|&(sym, op)| tail.find(sym).map(|at| (at, sym, op)))
            .min_by_key(|&(at, sym, _)| (at, usize::MAX - sym.len()));
        let Some((at, sym, op)) = found else {
            return Err(if tail.contains('=') {
                GateError::SingleEquals(t.to_owned())
            } else {
                GateError::NoOperator(t.to_owned())
            });
        };
        let metric = match selector {
            Selector::Steps => tail[..at].trim(),
            _ if tail[..at].trim().is_empty() => head.trim(),
            _ => {
                return Err(GateError::BadSelector {
                    text: t.to_owned(),
                    why: format!(
                        "'{}' stands between the selector and the operator",
                        tail[..at].trim()
                    ),
                });
            }
        };
        let raw = tail[at + sym.len()..].trim();
        if metric == CHECK_METRIC || matches!(selector, Selector::Check(_)) {
            return check_threshold(t, metric, selector, op, raw);
        }
        let known = known_metrics(&selector);
        if !known.iter().any(|k| k == metric) {
            return Err(GateError::UnknownMetric {
                text: t.to_owned(),
                metric: metric.to_owned(),
                of: selector.rows_phrase(),
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
            selector,
            op,
            value,
        })
    }
}

/// `check{id=NAME} (==|!=) STATUS`, the status a word.
fn check_threshold(
    t: &str,
    metric: &str,
    selector: Selector,
    op: Op,
    raw: &str,
) -> Result<Threshold, GateError> {
    let bad = |why: String| GateError::BadSelector {
        text: t.to_owned(),
        why,
    };
    if metric != CHECK_METRIC {
        return Err(bad(format!(
            "{{id=…}} selects a check, whose metric is `check`, not '{metric}'"
        )));
    }
    let Selector::Check(_) = selector else {
        return Err(bad(
            "`check` needs the check it means: check{id=NAME}".to_owned()
        ));
    };
    if !matches!(op, Op::Eq | Op::Ne) {
        return Err(bad(format!(
            "a check's status compares only with == and !=, not {}",
            op.as_str()
        )));
    }
    let Some(index) = CheckStatus::ALL.iter().position(|s| s.as_str() == raw) else {
        return Err(GateError::BadStatus {
            text: t.to_owned(),
            value: raw.to_owned(),
        });
    };
    Ok(Threshold {
        metric: metric.to_owned(),
        selector,
        op,
        value: index as f64,
    })
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
    /// The step of `worst`, for a step metric.
    #[serde(default)]
    pub worst_step: Option<u32>,
    /// A failed gate's figure against its limit where it was worst, e.g.
    /// `p99_ms{op=search} = 812 > 500 in step 4`; else the detail.
    #[serde(default)]
    pub failure: Option<String>,
    /// The gate found nothing to judge: no step recorded, or its figure empty in every step.
    #[serde(default)]
    pub no_data: bool,
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
            m => column(s, m),
        }
    }

    fn op_value(&self, o: &OpSummary) -> Option<f64> {
        match self.metric.as_str() {
            "anomalies" => Some(o.anomalies() as f64),
            "rejected" => Some(o.rejected() as f64),
            m => column(o, m),
        }
    }

    /// The value of this threshold's metric in each row it selects, by step; or, when the
    /// run has no such row at all, why.
    fn selected(&self, run: &RunFigures<'_>) -> Result<Vec<(u32, Option<f64>)>, String> {
        match &self.selector {
            // Judged apart, in `evaluate`: a check has no rows.
            Selector::Check(id) => Err(format!("check '{id}' has no rows per step")),
            Selector::Steps => Ok(run
                .steps
                .iter()
                .map(|s| (s.step, self.step_value(s)))
                .collect()),
            Selector::Op(op) => {
                let rows: Vec<_> = run
                    .ops
                    .iter()
                    .filter(|o| &o.op == op)
                    .map(|o| (o.step, self.op_value(o)))
                    .collect();
                if rows.is_empty() {
                    let names = distinct(run.ops.iter().map(|o| o.op.as_str()));
                    return Err(if names.is_empty() {
                        "the run recorded no per-operation figures".to_owned()
                    } else {
                        format!(
                            "the run measured no operation '{op}' (operations: {})",
                            names.join(", ")
                        )
                    });
                }
                Ok(rows)
            }
            Selector::Scenario { scenario, part } => {
                let part = part.as_deref().unwrap_or(WHOLE);
                let rows: Vec<_> = run
                    .scenarios
                    .iter()
                    .filter(|r| &r.scenario == scenario && r.part == part)
                    .map(|r| (r.step, column(r, &self.metric)))
                    .collect();
                if !rows.is_empty() {
                    return Ok(rows);
                }
                let names = distinct(run.scenarios.iter().map(|r| r.scenario.as_str()));
                let parts = distinct(
                    run.scenarios
                        .iter()
                        .filter(|r| &r.scenario == scenario && r.part != WHOLE)
                        .map(|r| r.part.as_str()),
                );
                Err(if names.is_empty() {
                    "the run ran no scenario".to_owned()
                } else if !names.contains(&scenario.as_str()) {
                    format!(
                        "the run ran no scenario '{scenario}' (scenarios: {})",
                        names.join(", ")
                    )
                } else {
                    format!(
                        "scenario '{scenario}' has no step '{part}' (its steps: {})",
                        parts.join(", ")
                    )
                })
            }
        }
    }

    /// Evaluates this threshold on a run: a step metric (with or without a selector) on every
    /// step's row (every one must hold; an empty cell fails; a step where the operation sent
    /// nothing has no row and is named, not failed); a knee metric on the knee (an unreached
    /// figure fails). A selector that matches no row of the run fails, saying what exists.
    pub fn evaluate(&self, run: &RunFigures<'_>) -> GateResult {
        let name = self.to_string();
        let fails = |detail: String| GateResult {
            threshold: name.clone(),
            holds: false,
            failing_steps: Vec::new(),
            worst: None,
            failure: Some(detail.clone()),
            detail,
            worst_step: None,
            no_data: false,
        };
        if self.selector == Selector::Steps && KNEE_METRICS.contains(&self.metric.as_str()) {
            let v = match self.metric.as_str() {
                "max_sustainable" => run.knee.max_sustainable,
                _ => run.knee.peak_throughput_rps,
            };
            let holds = v.is_some_and(|v| self.op.holds(v, self.value));
            let mut detail = match v {
                Some(v) => format!("{name} {}: {} is {v}", verdict(holds), self.metric),
                None => format!("{name} fails: the sweep reached no {}", self.metric),
            };
            if !holds {
                detail.push_str(&generator_note(&run.knee.generator_limited));
            }
            let failure = match v {
                Some(v) if !holds => Some(self.against(v, "in the sweep")),
                _ => (!holds).then(|| detail.clone()),
            };
            return GateResult {
                worst: v,
                holds,
                failure,
                detail,
                ..fails(String::new())
            };
        }
        if let Selector::Check(id) = &self.selector {
            let Some(check) = run.checks.iter().find(|c| &c.id == id && c.op.is_none()) else {
                let ids: Vec<&str> = run.checks.iter().map(|c| c.id.as_str()).collect();
                return fails(format!(
                    "{name} fails: the run judged no check '{id}' (checks: {})",
                    ids.join(", ")
                ));
            };
            let index = CheckStatus::ALL.iter().position(|s| *s == check.status);
            let holds = index.is_some_and(|i| self.op.holds(i as f64, self.value));
            let detail = format!(
                "{name} {}: {id} is {} ({})",
                verdict(holds),
                check.status.as_str(),
                check.reason
            );
            return GateResult {
                holds,
                failure: (!holds).then(|| detail.clone()),
                detail,
                ..fails(String::new())
            };
        }
        if run.steps.is_empty() {
            return GateResult {
                no_data: true,
                ..fails(format!("{name} fails: no step was recorded"))
            };
        }
        let values = match self.selected(run) {
            Ok(v) => v,
            Err(why) => return fails(format!("{name} fails: {why}")),
        };
        let mut failing = Vec::new();
        let mut empty = Vec::new();
        let mut worst: Option<(f64, u32)> = None;
        for &(step, value) in &values {
            match value {
                None => {
                    failing.push(step);
                    empty.push(step);
                }
                Some(v) => {
                    if !self.op.holds(v, self.value) {
                        failing.push(step);
                    }
                    if worst.is_none_or(|(w, _)| self.badness(v) > self.badness(w)) {
                        worst = Some((v, step));
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
        let limited: Vec<u32> = (failing.iter().copied())
            .filter(|f| run.steps.iter().any(|s| s.step == *f && s.generator_bound))
            .collect();
        detail.push_str(&generator_note(&limited));
        if let Selector::Op(op) = &self.selector {
            let idle: Vec<u32> = run
                .steps
                .iter()
                .map(|s| s.step)
                .filter(|s| !values.iter().any(|(v, _)| v == s))
                .collect();
            if !idle.is_empty() {
                detail.push_str(&format!(
                    "; operation '{op}' sent nothing in step{} {}",
                    plural(&idle),
                    list(&idle)
                ));
            }
        }
        let failure = match worst {
            _ if holds => None,
            // The worst value may hold while an empty cell fails: name the failing step.
            Some((v, step)) if !self.op.holds(v, self.value) => {
                Some(self.against(v, &format!("in step {step}")))
            }
            _ if !empty.is_empty() => Some(format!(
                "{}{} is empty in step{} {}",
                self.metric,
                self.selector,
                plural(&empty),
                list(&empty)
            )),
            _ => Some(detail.clone()),
        };
        GateResult {
            threshold: name,
            holds,
            no_data: !values.is_empty() && empty.len() == values.len(),
            failing_steps: failing,
            worst: worst.map(|(v, _)| v),
            worst_step: worst.map(|(_, s)| s),
            failure,
            detail,
        }
    }

    /// `p99_ms{op=search} = 812 > 500 in step 4`: the figure, its value, how it stands to the
    /// limit, and `place`; a value equal to the limit is `= 4, not > 4`.
    fn against(&self, v: f64, place: &str) -> String {
        let limit = self.value;
        let relation = match v.partial_cmp(&limit) {
            Some(std::cmp::Ordering::Less) => format!(" < {limit}"),
            Some(std::cmp::Ordering::Greater) => format!(" > {limit}"),
            _ => format!(", not {} {limit}", self.op.as_str()),
        };
        format!("{}{} = {v}{relation} {place}", self.metric, self.selector)
    }
}

/// The numeric value of column `name` of a row; `None` when empty or not a number.
fn column<R: Serialize>(row: &R, name: &str) -> Option<f64> {
    columns(row).get(name).and_then(serde_json::Value::as_f64)
}

/// The names in order of first appearance, each once.
pub fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// What thresholds are checked against: a run's steps, every step's ops.csv and scenarios.csv
/// rows, and its knee.
#[derive(Clone, Copy, Debug)]
pub struct RunFigures<'a> {
    pub steps: &'a [StepSummary],
    pub ops: &'a [OpSummary],
    pub scenarios: &'a [ScenarioSummary],
    pub knee: &'a Knee,
    /// The soak checks (docs/checks.md).
    pub checks: &'a [Check],
}

/// What a failing threshold adds when the generator limited steps it failed in: their
/// figures describe mcpload, not the server.
fn generator_note(limited: &[u32]) -> String {
    if limited.is_empty() {
        return String::new();
    }
    format!(
        "; the generator, not the server, limited step{} {}",
        plural(limited),
        list(limited)
    )
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
    pub fn evaluate(&self, run: &RunFigures<'_>) -> Vec<GateResult> {
        self.0.iter().map(|t| t.evaluate(run)).collect()
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
    fn selectors_parse_and_print_back() {
        let t: Threshold = " check { id = memory_leak } != fail ".parse().unwrap();
        assert_eq!(t.selector, Selector::Check("memory_leak".into()));
        assert_eq!((t.metric.as_str(), t.op), ("check", Op::Ne));
        assert_eq!(t.to_string(), "check{id=memory_leak}!=fail");
        let t: Threshold = "p99_ms{op=search}<300".parse().unwrap();
        assert_eq!(t.selector, Selector::Op("search".into()));
        assert_eq!(
            (t.metric.as_str(), t.op, t.value),
            ("p99_ms", Op::Lt, 300.0)
        );
        assert_eq!(t.to_string(), "p99_ms{op=search}<300");
        let t: Threshold = " error_rate { scenario = jobs , part = wait } <= 1% "
            .parse()
            .unwrap();
        assert_eq!(
            t.selector,
            Selector::Scenario {
                scenario: "jobs".into(),
                part: Some("wait".into())
            }
        );
        assert_eq!(t.to_string(), "error_rate{scenario=jobs,part=wait}<=0.01");
        // A name holding what ends a value is quoted, and reads back the same.
        let t: Threshold = r#"anomalies{op="a,b}\"c\\"}==0"#.parse().unwrap();
        assert_eq!(t.selector, Selector::Op(r#"a,b}"c\"#.into()));
        assert_eq!(t.to_string().parse::<Threshold>().unwrap(), t);
        // `=` inside a selector is no operator; the no-request row is an operation too.
        let t: Threshold = "unknown_id{op=-}==0".parse().unwrap();
        assert_eq!((t.selector, t.op), (Selector::Op("-".into()), Op::Eq));
        assert!(
            "completed_per_s{scenario=jobs}>=10"
                .parse::<Threshold>()
                .is_ok()
        );
    }

    #[test]
    fn selector_mistakes_are_named() {
        let e = |s: &str| s.parse::<Threshold>().unwrap_err().to_string();
        assert!(
            e("p99_ms{op=a<3").contains("'{' is not closed"),
            "{}",
            e("p99_ms{op=a<3")
        );
        for (text, says) in [
            ("p99_ms{}<3", "the selector is empty"),
            (
                "p99_ms{tool=a}<3",
                "unknown label 'tool' (labels: op, scenario, part, id)",
            ),
            ("p99_ms{op=a,op=b}<3", "label 'op' is given twice"),
            ("p99_ms{op=a,scenario=b}<3", "'op' goes with neither"),
            ("p99_ms{part=a}<3", "'part' needs a 'scenario'"),
            ("p99_ms{op=}<3", "label 'op' has no value"),
            ("p99_ms{op}<3", "'op' is no LABEL=VALUE"),
            (
                "p99_ms{op=a}x<3",
                "'x' stands between the selector and the operator",
            ),
            (r#"p99_ms{op="a}<3"#, "'{' is not closed"),
            ("check{id=a,op=b}!=fail", "'id' names a check"),
            ("p99_ms{id=memory_leak}<3", "whose metric is `check`"),
        ] {
            let msg = e(text);
            assert!(msg.contains(says), "{text}: {msg}");
            assert!(
                says.contains("not closed") || msg.contains("{scenario=NAME,part=STEP}"),
                "{text}: {msg}"
            );
        }
        let msg = e("completed_per_s{op=a}>1");
        assert!(
            msg.contains("unknown metric 'completed_per_s' of an operation")
                && msg.contains("known metrics of an operation: ")
                && msg.contains("p99_ms")
                && msg.contains("anomalies"),
            "{msg}"
        );
        let msg = e("throughput_rps{scenario=jobs}>1");
        assert!(
            msg.contains("of a scenario") && msg.contains("completed_per_s"),
            "{msg}"
        );
        assert!(e("max_sustainable{op=a}>1").contains("unknown metric 'max_sustainable'"));
    }

    #[test]
    fn deserialises_from_profile_strings() {
        let t: Thresholds = serde_json::from_str(r#"["p99_ms<250", "anomalies==0"]"#).unwrap();
        assert_eq!(t.0.len(), 2);
        assert!(serde_json::from_str::<Thresholds>(r#"["p99<250"]"#).is_err());
    }
}
