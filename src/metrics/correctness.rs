//! Correctness under concurrency: the defects race checks count (lost updates, double
//! effects, accepted conflicts, stale reads, first-call hangs), and one [`Finding`] per
//! defect seen, with its evidence (request ids, the values seen) and the likely cause in one
//! line. `probe --races` reports findings; a run's `tally` steps count them per step
//! (steps.csv) and keep their first findings (summary.json, the terminal, report.html).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::ops::AddAssign;

/// What a race check counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Defect {
    /// Updates that took no effect: expected minus observed.
    LostUpdates,
    /// Effects beyond the first of calls that share an idempotency key.
    DoubleEffects,
    /// Calls reusing an idempotency key with another input that were accepted.
    AcceptedConflicts,
    /// Reads that did not see the reader's own write.
    StaleReads,
    /// First calls never answered.
    FirstCallHangs,
}

impl Defect {
    pub const ALL: [Defect; 5] = [
        Defect::LostUpdates,
        Defect::DoubleEffects,
        Defect::AcceptedConflicts,
        Defect::StaleReads,
        Defect::FirstCallHangs,
    ];

    /// The defects a scenario's `tally` step may count (a run cannot start fresh servers,
    /// so first-call hangs are the probe's).
    pub const TALLIED: [Defect; 4] = [
        Defect::LostUpdates,
        Defect::DoubleEffects,
        Defect::AcceptedConflicts,
        Defect::StaleReads,
    ];

    /// Its name: a steps.csv column, a gate's metric, a `tally` key.
    pub fn name(self) -> &'static str {
        match self {
            Defect::LostUpdates => "lost_updates",
            Defect::DoubleEffects => "double_effects",
            Defect::AcceptedConflicts => "accepted_conflicts",
            Defect::StaleReads => "stale_reads",
            Defect::FirstCallHangs => "first_call_hangs",
        }
    }

    /// The defect named `name`.
    pub fn named(name: &str) -> Option<Defect> {
        Defect::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Its most likely cause, in one line.
    pub fn cause(self) -> &'static str {
        match self {
            Defect::LostUpdates => {
                "a read-modify-write without a lock or transaction: concurrent updates read the \
                 same value and overwrite each other"
            }
            Defect::DoubleEffects => {
                "the idempotency key is checked and recorded in two steps, not atomically: \
                 concurrent calls with one key all pass the check"
            }
            Defect::AcceptedConflicts => {
                "the idempotency key is not bound to the request's input: a changed request \
                 under a used key is taken as new, or silently replayed"
            }
            Defect::StaleReads => {
                "reads served from a replica or cache that lags the writes: eventual \
                 consistency where read-your-write was expected"
            }
            Defect::FirstCallHangs => {
                "a lazy initialisation that deadlocks when several first calls enter it at \
                 once (locks taken in different orders, or a call waiting on itself)"
            }
        }
    }
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One defect seen, with what shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub defect: Defect,
    /// How many (lost updates, double effects, hung calls, ...).
    pub count: u64,
    /// Where it was found: a probe check (`lost_updates`, `idempotency`, ...) or a run's
    /// `SCENARIO/STEP`.
    pub check: String,
    /// The step of the sweep (runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// The requests involved, by id.
    pub request_ids: Vec<String>,
    /// The values seen, by name.
    pub values: Map<String, Value>,
    /// The likely cause, in one line ([`Defect::cause`]).
    pub cause: String,
}

/// Request ids kept per finding at most.
pub const IDS_KEPT: usize = 16;

impl Finding {
    pub fn new(defect: Defect, count: u64, check: impl Into<String>) -> Self {
        Finding {
            defect,
            count,
            check: check.into(),
            step: None,
            request_ids: Vec::new(),
            values: Map::new(),
            cause: defect.cause().to_owned(),
        }
    }

    /// With these request ids (the first [`IDS_KEPT`]; the rest are counted in
    /// `values.more_request_ids`).
    pub fn ids<I: IntoIterator<Item = S>, S: ToString>(mut self, ids: I) -> Self {
        let mut more = 0u64;
        for id in ids {
            if self.request_ids.len() < IDS_KEPT {
                self.request_ids.push(id.to_string());
            } else {
                more += 1;
            }
        }
        if more > 0 {
            self.values.insert("more_request_ids".into(), more.into());
        }
        self
    }

    /// With a value seen.
    pub fn value(mut self, name: &str, v: impl Into<Value>) -> Self {
        self.values.insert(name.to_owned(), v.into());
        self
    }

    /// The evidence in one line: `requests a, b, c; before=3 after=5`.
    pub fn evidence(&self) -> String {
        let mut parts = Vec::new();
        if !self.request_ids.is_empty() {
            parts.push(format!("requests {}", self.request_ids.join(", ")));
        }
        if !self.values.is_empty() {
            let vals: Vec<String> = self
                .values
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect();
            parts.push(vals.join(" "));
        }
        parts.join("; ")
    }
}

/// Findings a step keeps per scenario; the counts go on.
pub const FINDINGS_KEPT: usize = 8;

/// What a scenario's `tally` steps counted in one step of the sweep: per defect a tally
/// may count, the sum (`None`: no tally of it ran), and the first findings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tallies {
    counts: [Option<u64>; Defect::TALLIED.len()],
    pub findings: Vec<Finding>,
}

impl Tallies {
    fn slot(d: Defect) -> usize {
        Defect::TALLIED
            .iter()
            .position(|t| *t == d)
            .expect("a tally counts a tallied defect")
    }

    /// `n` more of `d` (0 counts too: the tally ran).
    pub fn add(&mut self, d: Defect, n: u64) {
        let c = &mut self.counts[Tallies::slot(d)];
        *c = Some(c.unwrap_or(0) + n);
    }

    /// How many of `d` were counted; `None` when no tally of it ran.
    pub fn get(&self, d: Defect) -> Option<u64> {
        Defect::TALLIED
            .iter()
            .position(|t| *t == d)
            .and_then(|i| self.counts[i])
    }

    /// Keeps `f` while fewer than [`FINDINGS_KEPT`] are kept.
    pub fn keep(&mut self, f: Finding) {
        if self.findings.len() < FINDINGS_KEPT {
            self.findings.push(f);
        }
    }
}

impl AddAssign<&Tallies> for Tallies {
    fn add_assign(&mut self, o: &Tallies) {
        for d in Defect::TALLIED {
            if let Some(n) = o.get(d) {
                self.add(d, n);
            }
        }
        for f in &o.findings {
            self.keep(f.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_serialise_as_written() {
        for d in Defect::ALL {
            assert_eq!(Defect::named(d.name()), Some(d));
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
            assert!(!d.cause().is_empty());
        }
        assert_eq!(Defect::named("lost"), None);
    }

    #[test]
    fn tallies_add_up_and_keep_the_first_findings() {
        let mut a = Tallies::default();
        a.add(Defect::LostUpdates, 0);
        let mut b = Tallies::default();
        b.add(Defect::LostUpdates, 3);
        b.add(Defect::StaleReads, 1);
        for _ in 0..FINDINGS_KEPT {
            b.keep(Finding::new(Defect::LostUpdates, 1, "s/t"));
        }
        a.keep(Finding::new(Defect::StaleReads, 1, "first"));
        a += &b;
        assert_eq!(a.get(Defect::LostUpdates), Some(3));
        assert_eq!(a.get(Defect::StaleReads), Some(1));
        assert_eq!(a.get(Defect::DoubleEffects), None);
        assert_eq!(a.get(Defect::FirstCallHangs), None);
        assert_eq!(a.findings.len(), FINDINGS_KEPT);
        assert_eq!(a.findings[0].check, "first");
    }

    #[test]
    fn evidence_keeps_the_first_ids_and_counts_the_rest() {
        let f = Finding::new(Defect::LostUpdates, 3, "lost_updates")
            .ids(0..20)
            .value("before", 0)
            .value("key", "k1");
        assert_eq!(f.request_ids.len(), IDS_KEPT);
        assert_eq!(f.values["more_request_ids"], 4);
        let line = f.evidence();
        assert!(line.starts_with("requests 0, 1, 2"), "{line}");
        assert!(
            line.ends_with("before=0 key=k1 more_request_ids=4"),
            "{line}"
        );
    }
}
