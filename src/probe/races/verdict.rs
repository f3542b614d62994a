//! The race checks' verdicts: pure functions of what the calls brought back ([`Seen`]), with
//! the counts, a summary line and the findings with their evidence.

use crate::metrics::{Defect, Finding};
use crate::profile::expr::{Path, Scope};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// One call as observed.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    /// Its request id.
    pub id: String,
    /// Its answer: `{"result": …}` or `{"error": …}`.
    pub answer: Option<Value>,
    /// Why it ended without an answer (HTTP 429, a transport error, the child exited);
    /// `None` with no answer either: still unanswered when the wait ended.
    pub ended: Option<String>,
    /// From its send to its answer or end.
    pub after: Duration,
}

impl Seen {
    /// A call that got a result (not an error, not a tool result with `isError: true`).
    pub fn ok(&self) -> bool {
        self.answer
            .as_ref()
            .and_then(|a| a.get("result"))
            .is_some_and(|r| r.get("isError").and_then(Value::as_bool) != Some(true))
    }

    /// The value at `path` in its answer.
    pub fn at(&self, path: &Path) -> Option<&Value> {
        static NO_VARS: std::sync::LazyLock<Map<String, Value>> =
            std::sync::LazyLock::new(Map::new);
        let answer = self.answer.as_ref()?;
        path.lookup(&Scope {
            vars: &NO_VARS,
            answer: Some(answer),
        })
    }

    /// The number at `path` in its answer, as a whole number.
    fn number(&self, path: &Path) -> Option<i64> {
        let v = self.at(path)?;
        v.as_i64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                .map(|f| f as i64)
        })
    }

    /// Why it has no usable answer, in words.
    fn why_not(&self) -> String {
        match (&self.answer, &self.ended) {
            (Some(a), _) => match a.get("error") {
                Some(e) => format!(
                    "error {}",
                    e.get("code").map_or_else(|| "?".into(), Value::to_string)
                ),
                None => "a tool result with isError: true".into(),
            },
            (None, Some(why)) => why.clone(),
            (None, None) => "no answer".into(),
        }
    }
}

/// One race check's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckResult {
    /// `first_call`, `lost_updates`, `idempotency` or `read_your_write`.
    pub check: &'static str,
    /// `ok`, `found` (a defect, see `findings`), `slow` (first calls answered late, none
    /// hung), `inconclusive` (what was seen cannot say) or `skipped`.
    pub verdict: &'static str,
    /// What was done and seen, in one line.
    pub summary: String,
    pub counts: BTreeMap<&'static str, u64>,
    pub findings: Vec<Finding>,
}

impl CheckResult {
    pub fn skipped(check: &'static str, why: impl Into<String>) -> Self {
        CheckResult {
            check,
            verdict: "skipped",
            summary: why.into(),
            counts: BTreeMap::new(),
            findings: Vec::new(),
        }
    }

    fn of(check: &'static str, summary: String, findings: Vec<Finding>) -> Self {
        CheckResult {
            check,
            verdict: if findings.is_empty() { "ok" } else { "found" },
            summary,
            counts: BTreeMap::new(),
            findings,
        }
    }

    fn inconclusive(check: &'static str, summary: String) -> Self {
        CheckResult {
            verdict: "inconclusive",
            ..CheckResult::of(check, summary, Vec::new())
        }
    }

    fn count(mut self, name: &'static str, n: u64) -> Self {
        self.counts.insert(name, n);
        self
    }
}

/// Lost updates: a read (`before`), `adds` sent at once, a read (`after`); each add adds
/// `step`. Lost = expected (answered adds × step) − observed (after − before). The adds that
/// answered the same value as another are the evidence (each of those pairs lost one).
pub fn verdict_lost_updates(
    before: &Seen,
    adds: &[Seen],
    after: &Seen,
    value: &Path,
    step: i64,
    key: &str,
) -> CheckResult {
    const CHECK: &str = "lost_updates";
    let answered = adds.iter().filter(|a| a.ok()).count() as u64;
    let (Some(b), Some(a)) = (before.number(value), after.number(value)) else {
        let (which, s) = if before.number(value).is_none() {
            ("before", before)
        } else {
            ("after", after)
        };
        return CheckResult::inconclusive(
            CHECK,
            format!(
                "the read {which} the adds ({}) gave no number at {value}: {}",
                s.id,
                s.why_not()
            ),
        )
        .count("adds", adds.len() as u64)
        .count("answered", answered);
    };
    let expected = i64::try_from(answered)
        .unwrap_or(i64::MAX)
        .saturating_mul(step);
    let observed = a.saturating_sub(b);
    let failed = adds.len() as u64 - answered;
    let mut summary = format!(
        "{answered} of {} adds answered; the counter went {b} -> {a}, {expected:+} expected",
        adds.len()
    );
    if failed > 0 {
        summary.push_str(&format!(
            "; {failed} adds failed ({})",
            adds.iter()
                .find(|s| !s.ok())
                .map(Seen::why_not)
                .unwrap_or_default()
        ));
    }
    if observed > expected {
        return CheckResult::inconclusive(
            CHECK,
            format!(
                "{summary}: the counter grew more than the answered adds (another writer, or \
                 failed adds that took effect)"
            ),
        )
        .count("adds", adds.len() as u64)
        .count("answered", answered);
    }
    let lost = u64::try_from(expected - observed).unwrap_or(0);
    let mut findings = Vec::new();
    if lost > 0 {
        // Adds that answered a value another add answered too: one of each such pair was
        // overwritten.
        let mut by_value: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
        for s in adds.iter().filter(|s| s.ok()) {
            if let Some(v) = s.number(value) {
                by_value.entry(v).or_default().push(&s.id);
            }
        }
        let twins: Vec<&str> = by_value
            .values()
            .filter(|ids| ids.len() > 1)
            .flatten()
            .copied()
            .collect();
        let repeated = by_value.values().filter(|ids| ids.len() > 1).count();
        let mut f = Finding::new(Defect::LostUpdates, lost, CHECK)
            .ids([before.id.as_str(), after.id.as_str()])
            .value("key", key)
            .value("before", b)
            .value("after", a)
            .value("expected", expected)
            .value("answered_adds", answered);
        if twins.is_empty() {
            f = f.ids(adds.iter().map(|s| s.id.as_str()));
        } else {
            f = f.value("values_answered_twice", repeated as u64).ids(twins);
        }
        findings.push(f);
    }
    CheckResult::of(CHECK, summary, findings)
        .count("adds", adds.len() as u64)
        .count("answered", answered)
        .count(Defect::LostUpdates.name(), lost)
}

/// Idempotency: `calls` sent at once with one key and one input, the `read_back` of the
/// key's effects (with where their number is), then `changed` (the key with another input).
/// Effects = the read-back's number when there is one, else the distinct `effect` values
/// answered; double effects = effects − 1; an accepted conflict = `changed` answered with a
/// result.
pub fn verdict_idempotency(
    calls: &[Seen],
    effect: &Path,
    read_back: Option<(&Seen, &Path)>,
    changed: Option<&Seen>,
    key: &str,
) -> CheckResult {
    const CHECK: &str = "idempotency";
    let answered: Vec<&Seen> = calls.iter().filter(|s| s.ok()).collect();
    let mut effects: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for s in &answered {
        if let Some(v) = s.at(effect) {
            effects.entry(v.to_string()).or_default().push(&s.id);
        }
    }
    let read = read_back.map(|(s, path)| (s, s.number(path)));
    if answered.is_empty() {
        return CheckResult::inconclusive(
            CHECK,
            format!(
                "none of {} calls was answered with a result ({})",
                calls.len(),
                calls.first().map(Seen::why_not).unwrap_or_default()
            ),
        )
        .count("calls", calls.len() as u64);
    }
    if let Some((s, None)) = read {
        return CheckResult::inconclusive(
            CHECK,
            format!("the read-back ({}) gave no number: {}", s.id, s.why_not()),
        )
        .count("calls", calls.len() as u64)
        .count("answered", answered.len() as u64);
    }
    let distinct = effects.len() as u64;
    let read_count = read
        .and_then(|(_, n)| n)
        .map(|n| u64::try_from(n).unwrap_or(0));
    let counted = read_count.unwrap_or(distinct);
    let double = counted.saturating_sub(1);
    let mut summary = format!(
        "{} of {} calls answered, {distinct} distinct effect{}",
        answered.len(),
        calls.len(),
        if distinct == 1 { "" } else { "s" }
    );
    if let Some(n) = read_count {
        summary.push_str(&format!(", {n} read back"));
    }
    let mut findings = Vec::new();
    let shown: Vec<Value> = effects
        .keys()
        .map(|k| serde_json::from_str(k).unwrap_or(Value::Null))
        .collect();
    if double > 0 {
        let mut f = Finding::new(Defect::DoubleEffects, double, CHECK)
            .ids(effects.values().map(|ids| ids[0]))
            .value("key", key)
            .value("calls_answered", answered.len() as u64)
            .value("distinct_effects", distinct)
            .value("effects", Value::Array(shown.clone()));
        if let (Some((s, _)), Some(n)) = (read, read_count) {
            f = f.ids([s.id.as_str()]).value("read_back", n);
        }
        findings.push(f);
    }
    let mut accepted = 0;
    if let Some(c) = changed {
        if c.ok() {
            accepted = 1;
            let (what, value) = match c.at(effect) {
                Some(v) if effects.contains_key(&v.to_string()) => {
                    ("replayed the first input's effect", v.clone())
                }
                Some(v) => ("took effect anew", v.clone()),
                None => ("answered with a result", Value::Null),
            };
            summary.push_str(&format!("; the changed input {what}"));
            findings.push(
                Finding::new(Defect::AcceptedConflicts, 1, CHECK)
                    .ids([c.id.as_str()])
                    .value("key", key)
                    .value("answered", what)
                    .value("effect", value)
                    .value("first_effects", Value::Array(shown)),
            );
        } else {
            summary.push_str(&format!(
                "; the changed input was refused ({})",
                c.why_not()
            ));
        }
    }
    CheckResult::of(CHECK, summary, findings)
        .count("calls", calls.len() as u64)
        .count("answered", answered.len() as u64)
        .count("distinct_effects", distinct)
        .count(Defect::DoubleEffects.name(), double)
        .count(Defect::AcceptedConflicts.name(), accepted)
}

/// First calls: each attempt's burst. A call answered within `hang_after` is prompt, later
/// is slow; one still unanswered at the end of the wait hangs; one that ended without an
/// answer failed.
pub fn verdict_first_call(attempts: &[Vec<Seen>], hang_after: Duration) -> CheckResult {
    const CHECK: &str = "first_call";
    let all = || attempts.iter().flatten();
    let hung: Vec<&Seen> = all()
        .filter(|s| s.answer.is_none() && s.ended.is_none())
        .collect();
    let slow: Vec<&Seen> = all()
        .filter(|s| s.answer.is_some() && s.after > hang_after)
        .collect();
    let answered = all().filter(|s| s.answer.is_some()).count() as u64;
    let failed = all().filter(|s| s.ended.is_some()).count() as u64;
    let calls = all().count() as u64;
    let with_hangs = attempts
        .iter()
        .filter(|a| a.iter().any(|s| s.answer.is_none() && s.ended.is_none()))
        .count() as u64;
    let slowest = all().filter(|s| s.answer.is_some()).map(|s| s.after).max();
    let mut summary = format!(
        "{answered} of {calls} first calls answered ({} attempt{}",
        attempts.len(),
        if attempts.len() == 1 { "" } else { "s" }
    );
    if let Some(d) = slowest {
        summary.push_str(&format!("; the slowest in {} ms", d.as_millis()));
    }
    summary.push(')');
    if !slow.is_empty() {
        summary.push_str(&format!(
            "; {} after {}",
            slow.len(),
            humantime::format_duration(hang_after),
        ));
    }
    if !hung.is_empty() {
        summary.push_str(&format!(
            "; {} never answered, in {with_hangs} attempt{}",
            hung.len(),
            if with_hangs == 1 { "" } else { "s" }
        ));
    }
    if failed > 0 {
        summary.push_str(&format!(
            "; {failed} failed ({})",
            all()
                .find(|s| s.ended.is_some())
                .map(Seen::why_not)
                .unwrap_or_default()
        ));
    }
    let findings: Vec<Finding> = if hung.is_empty() {
        Vec::new()
    } else {
        vec![
            Finding::new(Defect::FirstCallHangs, hung.len() as u64, CHECK)
                .ids(hung.iter().map(|s| s.id.as_str()))
                .value("attempts", attempts.len() as u64)
                .value("attempts_with_hangs", with_hangs)
                .value(
                    "calls_per_attempt",
                    json!(attempts.first().map_or(0, Vec::len)),
                )
                .value(
                    "waited_ms",
                    json!(hung.iter().map(|s| s.after.as_millis() as u64).max()),
                ),
        ]
    };
    let mut r = CheckResult::of(CHECK, summary, findings);
    if hung.is_empty() && !slow.is_empty() {
        r.verdict = "slow";
    }
    r.count("calls", calls)
        .count("answered", answered)
        .count("slow", slow.len() as u64)
        .count("failed", failed)
        .count(Defect::FirstCallHangs.name(), hung.len() as u64)
        .count("attempts", attempts.len() as u64)
}

/// Read-your-write: each user's write and then its read; a read whose value differs from
/// the one the write reported is stale.
pub fn verdict_read_your_write(
    pairs: &[(Seen, Seen)],
    written: &Path,
    value: &Path,
) -> CheckResult {
    const CHECK: &str = "read_your_write";
    let mut stale = Vec::new();
    let mut unreadable = 0u64;
    for (w, r) in pairs {
        match (
            w.ok().then(|| w.at(written)).flatten(),
            r.ok().then(|| r.at(value)).flatten(),
        ) {
            (Some(x), Some(y)) if !crate::profile::expr::json_eq(x, y) => {
                stale.push((w, r, x.clone(), y.clone()));
            }
            (Some(_), Some(_)) => {}
            _ => unreadable += 1,
        }
    }
    let compared = pairs.len() as u64 - unreadable;
    let mut summary = format!(
        "{compared} of {} users wrote and read back, {} stale",
        pairs.len(),
        stale.len()
    );
    if unreadable > 0 {
        let why = pairs
            .iter()
            .find(|(w, r)| !w.ok() || !r.ok() || w.at(written).is_none() || r.at(value).is_none())
            .map(|(w, r)| {
                if w.ok() && w.at(written).is_some() {
                    format!("read {}: {}", r.id, missing(r, value))
                } else {
                    format!("write {}: {}", w.id, missing(w, written))
                }
            })
            .unwrap_or_default();
        summary.push_str(&format!("; {unreadable} without both values ({why})"));
    }
    if compared == 0 {
        return CheckResult::inconclusive(CHECK, summary).count("users", pairs.len() as u64);
    }
    let findings = if stale.is_empty() {
        Vec::new()
    } else {
        let seen: Vec<Value> = stale
            .iter()
            .take(8)
            .map(|(w, r, x, y)| json!({"write": w.id, "wrote": x, "read": r.id, "saw": y}))
            .collect();
        vec![
            Finding::new(Defect::StaleReads, stale.len() as u64, CHECK)
                .ids(
                    stale
                        .iter()
                        .flat_map(|(w, r, ..)| [w.id.as_str(), r.id.as_str()]),
                )
                .value("pairs", Value::Array(seen))
                .value(
                    "read_after_write_ms",
                    json!(
                        stale
                            .iter()
                            .map(|(_, r, ..)| r.after.as_millis() as u64)
                            .max()
                    ),
                ),
        ]
    };
    CheckResult::of(CHECK, summary, findings)
        .count("users", pairs.len() as u64)
        .count("compared", compared)
        .count(Defect::StaleReads.name(), stale.len() as u64)
}

/// Why a call has no value at `path`.
fn missing(s: &Seen, path: &Path) -> String {
    if s.ok() {
        format!("nothing at {path}")
    } else {
        s.why_not()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Path {
        Path::parse(p).unwrap()
    }

    fn result(id: &str, v: Value) -> Seen {
        Seen {
            id: id.into(),
            answer: Some(json!({"result": {"structuredContent": v}})),
            ended: None,
            after: Duration::from_millis(5),
        }
    }

    fn error(id: &str, code: i64) -> Seen {
        Seen {
            id: id.into(),
            answer: Some(json!({"error": {"code": code, "message": "no"}})),
            ended: None,
            after: Duration::from_millis(5),
        }
    }

    fn silent(id: &str, after_ms: u64) -> Seen {
        Seen {
            id: id.into(),
            answer: None,
            ended: None,
            after: Duration::from_millis(after_ms),
        }
    }

    #[test]
    fn lost_updates_are_expected_minus_observed_with_twins_as_evidence() {
        let v = path("result.structuredContent.value");
        let adds: Vec<Seen> = [1, 2, 2, 3, 3, 3]
            .iter()
            .enumerate()
            .map(|(i, n)| result(&format!("a{i}"), json!({"value": n})))
            .collect();
        let r = verdict_lost_updates(
            &result("r0", json!({"value": 0})),
            &adds,
            &result("r1", json!({"value": 3})),
            &v,
            1,
            "k",
        );
        assert_eq!(r.verdict, "found");
        assert_eq!(r.counts["lost_updates"], 3);
        let f = &r.findings[0];
        assert_eq!(f.request_ids, ["r0", "r1", "a1", "a2", "a3", "a4", "a5"]);
        assert_eq!(f.values["values_answered_twice"], 2);
        let ok = verdict_lost_updates(
            &result("r0", json!({"value": 10})),
            &adds[..2],
            &result("r1", json!({"value": 12})),
            &v,
            1,
            "k",
        );
        assert_eq!((ok.verdict, ok.counts["lost_updates"]), ("ok", 0));
        let grew = verdict_lost_updates(
            &result("r0", json!({"value": 0})),
            &[error("a0", -32000)],
            &result("r1", json!({"value": 1})),
            &v,
            1,
            "k",
        );
        assert_eq!(grew.verdict, "inconclusive");
        assert!(
            grew.summary.contains("1 adds failed (error -32000)"),
            "{}",
            grew.summary
        );
        let unread = verdict_lost_updates(
            &error("r0", -32601),
            &adds,
            &result("r1", json!({})),
            &v,
            1,
            "k",
        );
        assert_eq!(unread.verdict, "inconclusive");
        assert!(
            unread.summary.contains("before the adds (r0)"),
            "{}",
            unread.summary
        );
    }

    #[test]
    fn idempotency_counts_effects_and_conflicts() {
        let e = path("result.structuredContent.job_id");
        let n = path("result.structuredContent.count");
        let calls = vec![
            result("c0", json!({"job_id": "job-1"})),
            result("c1", json!({"job_id": "job-1"})),
            result("c2", json!({"job_id": "job-2"})),
            error("c3", -32011),
        ];
        let back = result("b", json!({"count": 2}));
        let refused = error("x", -32010);
        let r = verdict_idempotency(&calls, &e, Some((&back, &n)), Some(&refused), "k");
        assert_eq!(r.verdict, "found");
        assert_eq!(
            (r.counts["double_effects"], r.counts["accepted_conflicts"]),
            (1, 0)
        );
        assert_eq!(r.findings[0].request_ids, ["c0", "c2", "b"]);
        assert!(
            r.summary.ends_with("refused (error -32010)"),
            "{}",
            r.summary
        );
        let replay = result("x", json!({"job_id": "job-1"}));
        let r = verdict_idempotency(&calls[..2], &e, None, Some(&replay), "k");
        assert_eq!(
            (r.counts["double_effects"], r.counts["accepted_conflicts"]),
            (0, 1)
        );
        assert_eq!(r.findings[0].defect, Defect::AcceptedConflicts);
        assert_eq!(
            r.findings[0].values["answered"],
            "replayed the first input's effect"
        );
        let none = verdict_idempotency(&calls[3..], &e, None, None, "k");
        assert_eq!(none.verdict, "inconclusive");
    }

    #[test]
    fn first_calls_tell_hangs_from_slow_answers() {
        let mut slow = result("s", json!({}));
        slow.after = Duration::from_millis(900);
        let attempts = vec![
            vec![result("a", json!({})), slow.clone()],
            vec![silent("h1", 3000), silent("h2", 3000)],
        ];
        let r = verdict_first_call(&attempts, Duration::from_millis(500));
        assert_eq!(r.verdict, "found");
        assert_eq!(
            (
                r.counts["first_call_hangs"],
                r.counts["slow"],
                r.counts["answered"]
            ),
            (2, 1, 2)
        );
        assert_eq!(r.findings[0].request_ids, ["h1", "h2"]);
        assert_eq!(r.findings[0].values["attempts_with_hangs"], 1);
        let only_slow = verdict_first_call(&attempts[..1], Duration::from_millis(500));
        assert_eq!(only_slow.verdict, "slow");
        let mut down = silent("d", 10);
        down.ended = Some("the server went down".into());
        let r = verdict_first_call(&[vec![down]], Duration::from_millis(500));
        assert_eq!((r.verdict, r.counts["failed"]), ("ok", 1));
    }

    #[test]
    fn read_your_write_counts_reads_that_miss_the_write() {
        let v = path("result.structuredContent.value");
        let pairs = vec![
            (
                result("w0", json!({"value": 1})),
                result("r0", json!({"value": 1})),
            ),
            (
                result("w1", json!({"value": 1})),
                result("r1", json!({"value": 0})),
            ),
            (error("w2", -32000), result("r2", json!({"value": 0}))),
        ];
        let r = verdict_read_your_write(&pairs, &v, &v);
        assert_eq!(r.verdict, "found");
        assert_eq!((r.counts["stale_reads"], r.counts["compared"]), (1, 2));
        assert_eq!(r.findings[0].request_ids, ["w1", "r1"]);
        assert!(
            r.summary.contains("write w2: error -32000"),
            "{}",
            r.summary
        );
    }
}
