//! Fault injection decided by the request's fault sequence number alone: exact periods
//! (`drop=10` faults requests 10, 20, 30, …) and seeded probabilities, both deterministic.
//! When several kinds match one request, the first in [`FaultKind::ALL`] order wins.

use super::config::ConfigError;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

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
}

impl FaultKind {
    /// Every kind, in precedence order.
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Drop,
        FaultKind::NullId,
        FaultKind::UnknownId,
        FaultKind::Duplicate,
        FaultKind::Both,
        FaultKind::BadVersion,
        FaultKind::Garbage,
        FaultKind::Truncate,
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
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    fn from_name(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Splits `kind=value,kind=value` and parses each value; a kind named twice is an error.
fn parse_pairs<T: Copy + Default>(
    what: &'static str,
    text: &str,
    value: impl Fn(&str) -> Option<T>,
) -> Result<[T; 8], ConfigError> {
    let err = |why: String| ConfigError::Syntax {
        what,
        text: text.to_owned(),
        why,
    };
    let mut out = [T::default(); 8];
    let mut seen = [false; 8];
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, v) = part
            .split_once('=')
            .ok_or_else(|| err(format!("`{part}` is not KIND=VALUE")))?;
        let kind = FaultKind::from_name(name.trim()).ok_or_else(|| {
            err(format!(
                "unknown fault `{name}` (known: {})",
                FaultKind::ALL.map(FaultKind::name).join(", ")
            ))
        })?;
        if std::mem::replace(&mut seen[kind.index()], true) {
            return Err(err(format!("`{name}` given twice")));
        }
        out[kind.index()] = value(v.trim()).ok_or_else(|| err(format!("bad value in `{part}`")))?;
    }
    Ok(out)
}

/// Exact faults: `drop=10,garbage=7` spoils every 10th and every 7th request (the 70th gets
/// `drop`, the earlier kind). A period of 1 spoils every request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct FaultEvery([u64; 8]);

impl FaultEvery {
    /// The period of `kind` (0: never).
    pub fn period(&self, kind: FaultKind) -> u64 {
        self.0[kind.index()]
    }

    pub fn is_off(&self) -> bool {
        self.0.iter().all(|p| *p == 0)
    }

    fn pick(&self, seq: u64) -> Option<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .find(|k| matches!(self.period(*k), p if p > 0 && seq.is_multiple_of(p)))
    }
}

impl FromStr for FaultEvery {
    type Err = ConfigError;
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        parse_pairs("fault", text, |v| v.parse::<u64>().ok().filter(|n| *n > 0)).map(FaultEvery)
    }
}

impl TryFrom<String> for FaultEvery {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Self, ConfigError> {
        s.parse()
    }
}

impl fmt::Display for FaultEvery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = FaultKind::ALL
            .into_iter()
            .filter(|k| self.period(*k) > 0)
            .map(|k| format!("{}={}", k.name(), self.period(k)))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Seeded random faults: `drop=0.01,truncate=0.001` gives each request those probabilities
/// (their sum must not exceed 1). One uniform draw per request, derived from the seed and
/// the sequence number, picks at most one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub struct FaultOdds([f64; 8]);

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
    type Err = ConfigError;
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        let odds = parse_pairs("fault-random", text, |v| {
            v.parse::<f64>().ok().filter(|p| (0.0..=1.0).contains(p))
        })?;
        if odds.iter().sum::<f64>() > 1.0 + 1e-9 {
            return Err(ConfigError::Syntax {
                what: "fault-random",
                text: text.to_owned(),
                why: "probabilities add up to more than 1".into(),
            });
        }
        Ok(FaultOdds(odds))
    }
}

impl TryFrom<String> for FaultOdds {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Self, ConfigError> {
        s.parse()
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
        self.every.pick(seq).or_else(|| {
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
