//! Fault injection decided by the request's fault sequence number alone: exact periods
//! (`drop=10` faults requests 10, 20, 30, …) and seeded probabilities, both deterministic.
//! When several kinds match one request, the first in [`FaultKind::ALL`] order wins. Exact
//! periods are one type for every family ([`Periods`]): the answer faults ([`FaultEvery`])
//! and the protocol anomalies of tasks and progress ([`TaskFault`], [`ProgressFault`]).

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

/// A knob's text that does not parse, for the fault families here and the configuration's
/// value types alike: ``invalid fault `drop=x`: bad value in `drop=x` ``.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid {what} `{text}`: {why}")]
pub struct SyntaxError {
    pub what: &'static str,
    pub text: String,
    pub why: String,
}

/// One way to spoil an answer. The order of [`FaultKind::ALL`] is the precedence order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// No answer at all.
    Drop,
    /// The answer is an error with `"id": null`.
    NullId,
    /// The answer carries an id the client never issued.
    UnknownId,
    /// The answer is sent twice.
    Duplicate,
    /// The answer carries both `result` and `error`.
    Both,
    /// The answer says `"jsonrpc": "1.0"`.
    BadVersion,
    /// Non-JSON bytes instead of the answer.
    Garbage,
    /// The answer is cut in the middle.
    Truncate,
    /// The request is refused as a 2026-07-28 server refuses a version it does not serve:
    /// HTTP 400, error -32022 with `data.supported`, under the request's id.
    VersionRejected,
    /// A `tools/call` result becomes a tool error (`isError: true`); other requests are
    /// left alone (and not counted as faulted).
    ToolError,
    /// A `tools/call` result's `structuredContent` is emptied, breaking the `outputSchema`
    /// its tool declares; requests of tools that declare none are left alone.
    BadStructured,
}

impl FaultKind {
    /// Every kind, in precedence order: the wire faults, then those that change a result.
    pub const ALL: [FaultKind; 11] = [
        FaultKind::Drop,
        FaultKind::NullId,
        FaultKind::UnknownId,
        FaultKind::Duplicate,
        FaultKind::Both,
        FaultKind::BadVersion,
        FaultKind::Garbage,
        FaultKind::Truncate,
        FaultKind::VersionRejected,
        FaultKind::ToolError,
        FaultKind::BadStructured,
    ];

    /// The name used on the command line and in profiles.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Drop => "drop",
            FaultKind::NullId => "null-id",
            FaultKind::UnknownId => "unknown-id",
            FaultKind::Duplicate => "duplicate",
            FaultKind::Both => "both",
            FaultKind::BadVersion => "bad-version",
            FaultKind::Garbage => "garbage",
            FaultKind::Truncate => "truncate",
            FaultKind::VersionRejected => "version-rejected",
            FaultKind::ToolError => "tool-error",
            FaultKind::BadStructured => "bad-structured",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Whether the fault changes what the method answers (a valid result all the same)
    /// rather than how the answer goes on the wire.
    pub(crate) fn changes_result(self) -> bool {
        matches!(self, FaultKind::ToolError | FaultKind::BadStructured)
    }
}

/// Splits `kind=value,kind=value` over the kinds `names` and parses each value; a kind named
/// twice is an error.
fn parse_pairs<T: Copy + Default, const K: usize>(
    what: &'static str,
    text: &str,
    names: &[&'static str],
    value: impl Fn(&str) -> Option<T>,
) -> Result<[T; K], SyntaxError> {
    let err = |why: String| SyntaxError {
        what,
        text: text.to_owned(),
        why,
    };
    debug_assert!(names.len() <= K);
    let mut out = [T::default(); K];
    let mut seen = [false; K];
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, v) = part
            .split_once('=')
            .ok_or_else(|| err(format!("`{part}` is not KIND=VALUE")))?;
        let i = names
            .iter()
            .position(|n| *n == name.trim())
            .ok_or_else(|| {
                err(format!(
                    "unknown fault `{name}` (known: {})",
                    names.join(", ")
                ))
            })?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(err(format!("`{name}` given twice")));
        }
        out[i] = value(v.trim()).ok_or_else(|| err(format!("bad value in `{part}`")))?;
    }
    Ok(out)
}

/// A period (every Nth, N > 0).
/// The text [`parse_pairs`] reads: comma-separated `NAME=VALUE` parts (empty parts
/// skipped), each name one of `names`, each value of the form `value`. A name given twice is
/// refused only when read.
fn pairs_pattern(names: &[&str], value: &str) -> String {
    let pair = format!(r"\s*(?:(?:{})\s*=\s*{value}\s*)?", names.join("|"));
    format!("^{pair}(?:,{pair})*$")
}

fn period(v: &str) -> Option<u64> {
    v.parse::<u64>().ok().filter(|n| *n > 0)
}

/// Exact faults: `drop=10,garbage=7` spoils every 10th and every 7th request (the 70th gets
/// `drop`, the earlier kind). A period of 1 spoils every request.
pub type FaultEvery = Periods<FaultKind>;

impl Anomaly for FaultKind {
    const WHAT: &'static str = "fault";
    const ALL: &'static [FaultKind] = &FaultKind::ALL;
    fn name(self) -> &'static str {
        FaultKind::name(self)
    }
}

/// Seeded random faults: `drop=0.01,truncate=0.001` gives each request those probabilities
/// (their sum must not exceed 1). One uniform draw per request, derived from the seed and
/// the sequence number, picks at most one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub struct FaultOdds([f64; FaultKind::ALL.len()]);

impl FaultOdds {
    pub fn probability(&self, kind: FaultKind) -> f64 {
        self.0[kind.index()]
    }

    pub fn is_off(&self) -> bool {
        self.0.iter().all(|p| *p == 0.0)
    }

    fn pick(&self, seed: u64, seq: u64) -> Option<FaultKind> {
        let u: f64 = draw_rng(seed ^ FAULT_SALT, seq).random();
        let mut acc = 0.0;
        FaultKind::ALL.into_iter().find(|k| {
            acc += self.probability(*k);
            u < acc
        })
    }
}

impl FromStr for FaultOdds {
    type Err = SyntaxError;
    fn from_str(text: &str) -> Result<Self, SyntaxError> {
        let odds = parse_pairs(
            "fault-random",
            text,
            &FaultKind::ALL.map(FaultKind::name),
            |v| v.parse::<f64>().ok().filter(|p| (0.0..=1.0).contains(p)),
        )?;
        if odds.iter().sum::<f64>() > 1.0 + 1e-9 {
            return Err(SyntaxError {
                what: "fault-random",
                text: text.to_owned(),
                why: "probabilities add up to more than 1".into(),
            });
        }
        Ok(FaultOdds(odds))
    }
}

impl JsonSchema for FaultOdds {
    fn schema_name() -> Cow<'static, str> {
        "FaultOdds".into()
    }

    /// What [`FaultOdds::from_str`] reads (the sum at most 1 is checked when read).
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names = FaultKind::ALL.map(FaultKind::name);
        json_schema!({
            "type": "string",
            "pattern": pairs_pattern(&names, r"(?:0*\.[0-9]+|0+(?:\.[0-9]*)?|0*1(?:\.0*)?)"),
            "examples": ["drop=0.01,truncate=0.001"],
        })
    }
}

impl TryFrom<String> for FaultOdds {
    type Error = SyntaxError;
    fn try_from(s: String) -> Result<Self, SyntaxError> {
        s.parse()
    }
}

/// The most kinds one family of anomalies has.
const MAX_KINDS: usize = FaultKind::ALL.len();

/// One family of anomalies the target can play exactly (answer faults, task faults, progress
/// faults): each kind has a name and is injected every Nth time its subject comes up.
pub trait Anomaly: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// The knob's name in error messages (`task-fault`).
    const WHAT: &'static str;
    /// Every kind, in precedence order (at most [`MAX_KINDS`]).
    const ALL: &'static [Self];
    /// The name used on the command line and in profiles.
    fn name(self) -> &'static str;
}

/// Exact periods of one family of anomalies: `regress=5,forget=7` (every 5th and every 7th;
/// where both match, the earlier kind of [`Anomaly::ALL`] wins).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Periods<A: Anomaly> {
    every: [u64; MAX_KINDS],
    kinds: PhantomData<A>,
}

impl<A: Anomaly> Default for Periods<A> {
    fn default() -> Self {
        Periods {
            every: [0; MAX_KINDS],
            kinds: PhantomData,
        }
    }
}

impl<A: Anomaly> Periods<A> {
    fn index(kind: A) -> usize {
        A::ALL.iter().position(|k| *k == kind).unwrap_or(0)
    }

    /// The period of `kind` (0: never).
    pub fn period(&self, kind: A) -> u64 {
        self.every[Self::index(kind)]
    }

    /// True when `kind` hits the `n`th occurrence (from 1).
    pub fn hits(&self, kind: A, n: u64) -> bool {
        matches!(self.period(kind), p if p > 0 && n.is_multiple_of(p))
    }

    /// The first kind of `among` that hits the `n`th occurrence.
    pub fn pick(&self, among: &[A], n: u64) -> Option<A> {
        among.iter().copied().find(|k| self.hits(*k, n))
    }

    /// True when no kind is ever injected.
    pub fn is_off(&self) -> bool {
        self.every.iter().all(|p| *p == 0)
    }
}

impl<A: Anomaly> FromStr for Periods<A> {
    type Err = SyntaxError;
    fn from_str(text: &str) -> Result<Self, SyntaxError> {
        let names: Vec<&'static str> = A::ALL.iter().map(|k| k.name()).collect();
        Ok(Periods {
            every: parse_pairs(A::WHAT, text, &names, period)?,
            kinds: PhantomData,
        })
    }
}

impl<A: Anomaly> TryFrom<String> for Periods<A> {
    type Error = SyntaxError;
    fn try_from(s: String) -> Result<Self, SyntaxError> {
        s.parse()
    }
}

impl<A: Anomaly> JsonSchema for Periods<A> {
    fn schema_name() -> Cow<'static, str> {
        format!("Periods_{}", A::WHAT.replace(' ', "_")).into()
    }

    /// What [`Periods::from_str`] reads: `KIND=N` parts, N a whole number above 0.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = A::ALL.iter().map(|k| k.name()).collect();
        json_schema!({"type": "string", "pattern": pairs_pattern(&names, "0*[1-9][0-9]*")})
    }
}

impl<'de, A: Anomaly> Deserialize<'de> for Periods<A> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl<A: Anomaly> fmt::Display for Periods<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = A::ALL
            .iter()
            .filter(|k| self.period(**k) > 0)
            .map(|k| format!("{}={}", k.name(), self.period(*k)))
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl<A: Anomaly> fmt::Debug for Periods<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

/// A task anomaly (`--task-fault`); see docs/target.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskFault {
    /// The task is forgotten as soon as its creation was answered.
    Forget,
    /// The task gets the id of the task created before it.
    ReuseId,
    /// The task stays `working` until its ttl ends.
    NeverEnds,
    /// Once reported terminal, the task is reported `working` again.
    Regress,
    /// The terminal status is flipped (completed ⇄ failed); the result stays.
    Mismatch,
    /// A `tasks/get` is answered with an error (counted per `tasks/get`, not per task).
    GetError,
}

impl TaskFault {
    /// The kinds that mark a task at its creation, in precedence order.
    pub(crate) const PER_TASK: [TaskFault; 5] = [
        TaskFault::Forget,
        TaskFault::ReuseId,
        TaskFault::NeverEnds,
        TaskFault::Regress,
        TaskFault::Mismatch,
    ];
}

impl Anomaly for TaskFault {
    const WHAT: &'static str = "task-fault";
    const ALL: &'static [TaskFault] = &[
        TaskFault::Forget,
        TaskFault::ReuseId,
        TaskFault::NeverEnds,
        TaskFault::Regress,
        TaskFault::Mismatch,
        TaskFault::GetError,
    ];
    fn name(self) -> &'static str {
        match self {
            TaskFault::Forget => "forget",
            TaskFault::ReuseId => "reuse-id",
            TaskFault::NeverEnds => "never-ends",
            TaskFault::Regress => "regress",
            TaskFault::Mismatch => "mismatch",
            TaskFault::GetError => "get-error",
        }
    }
}

/// A progress anomaly of the `progress` tool (`--progress-fault`); see docs/target.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressFault {
    /// One more notification after the call's answer.
    AfterResult,
    /// The second notification reports less progress than the first.
    Down,
    /// The first notification carries a token the client never issued.
    UnknownToken,
}

impl Anomaly for ProgressFault {
    const WHAT: &'static str = "progress-fault";
    const ALL: &'static [ProgressFault] = &[
        ProgressFault::AfterResult,
        ProgressFault::Down,
        ProgressFault::UnknownToken,
    ];
    fn name(self) -> &'static str {
        match self {
            ProgressFault::AfterResult => "after-result",
            ProgressFault::Down => "down",
            ProgressFault::UnknownToken => "unknown-token",
        }
    }
}

const FAULT_SALT: u64 = 0x6661_756c_7473_2121;

/// A small generator for draw number `n` of stream `seed`: the same (seed, n) always gives the
/// same values, whatever order requests arrive in across threads.
pub(crate) fn draw_rng(seed: u64, n: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The fault decision for a server: exact periods first, then the random odds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FaultPlan {
    every: FaultEvery,
    odds: FaultOdds,
    seed: u64,
}

impl FaultPlan {
    pub(super) fn new(every: FaultEvery, odds: FaultOdds, seed: u64) -> Self {
        FaultPlan { every, odds, seed }
    }

    pub(super) fn is_off(&self) -> bool {
        self.every.is_off() && self.odds.is_off()
    }

    /// The fault for the request with fault sequence number `seq` (1-based), if any.
    pub(super) fn for_seq(&self, seq: u64) -> Option<FaultKind> {
        self.every.pick(FaultKind::ALL.as_slice(), seq).or_else(|| {
            if self.odds.is_off() {
                None
            } else {
                self.odds.pick(self.seed, seq)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_periods_with_precedence() {
        let every: FaultEvery = "garbage=3,drop=2".parse().unwrap();
        let plan = FaultPlan::new(every, FaultOdds::default(), 0);
        let got: Vec<_> = (1..=6).map(|s| plan.for_seq(s)).collect();
        assert_eq!(
            got,
            [
                None,
                Some(FaultKind::Drop),
                Some(FaultKind::Garbage),
                Some(FaultKind::Drop),
                None,
                Some(FaultKind::Drop), // 6: both match, drop comes first
            ]
        );
        assert_eq!(every.to_string(), "drop=2,garbage=3");
    }

    #[test]
    fn bad_fault_text() {
        assert!("drop".parse::<FaultEvery>().is_err());
        assert!("drop=0".parse::<FaultEvery>().is_err());
        assert!("drop=2,drop=3".parse::<FaultEvery>().is_err());
        assert!("explode=2".parse::<FaultEvery>().is_err());
        assert!("drop=0.7,garbage=0.5".parse::<FaultOdds>().is_err());
        assert!("drop=1.5".parse::<FaultOdds>().is_err());
        assert!("".parse::<FaultEvery>().unwrap().is_off());
    }

    #[test]
    fn anomaly_periods_read_pick_and_print() {
        let p: Periods<TaskFault> = "regress=3,forget=2,get-error=5".parse().unwrap();
        assert_eq!(p.to_string(), "forget=2,regress=3,get-error=5");
        assert_eq!(p.pick(&TaskFault::PER_TASK, 6), Some(TaskFault::Forget));
        assert_eq!(p.pick(&TaskFault::PER_TASK, 3), Some(TaskFault::Regress));
        assert_eq!(p.pick(&TaskFault::PER_TASK, 5), None);
        assert!(p.hits(TaskFault::GetError, 10));
        assert!("drop=2".parse::<Periods<TaskFault>>().is_err());
        assert!("down=0".parse::<Periods<ProgressFault>>().is_err());
        let q: Periods<ProgressFault> = serde_json::from_str(r#""after-result=1""#).unwrap();
        assert!(q.hits(ProgressFault::AfterResult, 7));
    }

    #[test]
    fn random_mode_is_seeded_and_near_its_odds() {
        let odds: FaultOdds = "drop=0.1,truncate=0.2".parse().unwrap();
        let a = FaultPlan::new(FaultEvery::default(), odds, 7);
        let b = FaultPlan::new(FaultEvery::default(), odds, 7);
        let c = FaultPlan::new(FaultEvery::default(), odds, 8);
        let run = |p: &FaultPlan| (1..=20_000).map(|s| p.for_seq(s)).collect::<Vec<_>>();
        let (ra, rb, rc) = (run(&a), run(&b), run(&c));
        assert_eq!(ra, rb);
        assert_ne!(ra, rc);
        let drops = ra.iter().filter(|f| **f == Some(FaultKind::Drop)).count();
        let cuts = ra
            .iter()
            .filter(|f| **f == Some(FaultKind::Truncate))
            .count();
        assert!((1_600..2_400).contains(&drops), "{drops}");
        assert!((3_400..4_600).contains(&cuts), "{cuts}");
        assert!(
            ra.iter()
                .flatten()
                .all(|k| matches!(k, FaultKind::Drop | FaultKind::Truncate))
        );
    }
}
