//! Progress is not a result: each class of docs/metrics.md "Progress" against the real
//! correlator, one notification at a time through the decoder.

use mcpload::correlator::{Correlator, End, Sent, Tag};
use mcpload::jsonrpc::Id;
use mcpload::metrics::Stats;
use std::time::{Duration, Instant};

const WITH_PROGRESS: Tag = Tag {
    op: 0,
    owner: None,
    part_of_call: false,
    progress: true,
};

/// A correlator with calls 1..=n asking for progress, and call 100 not, all due at `t0`.
fn calls(n: i64) -> (Correlator, Instant) {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    let sent = Sent {
        due: t0,
        written: t0,
        deadline: t0 + Duration::from_secs(60),
    };
    for i in 1..=n {
        c.register_tagged(Id::Num(i), sent, WITH_PROGRESS).unwrap();
    }
    c.register(Id::Num(100), sent).unwrap();
    (c, t0)
}

fn note(c: &mut Correlator, params: &str, at: Instant) {
    let text =
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{params}}}"#);
    c.ingest(text.as_bytes(), at);
}

fn progress(c: &mut Correlator, token: &str, value: f64, at: Instant) {
    note(
        c,
        &format!(r#"{{"progressToken":{token},"progress":{value},"total":10}}"#),
        at,
    );
}

fn answer(c: &mut Correlator, id: i64, at: Instant) {
    c.ingest(
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#).as_bytes(),
        at,
    );
}

/// The progress anomalies, in the order of docs/metrics.md.
fn anomalies(s: &Stats) -> [u64; 4] {
    let c = &s.counters;
    [
        c.progress_after_result,
        c.progress_down,
        c.progress_unknown_token,
        c.progress_then_missing,
    ]
}

#[test]
fn rising_progress_then_the_answer_is_no_anomaly() {
    let (mut c, t0) = calls(1);
    progress(&mut c, "1", 1.0, t0 + Duration::from_millis(7));
    progress(&mut c, "1", 2.5, t0 + Duration::from_millis(8));
    answer(&mut c, 1, t0 + Duration::from_millis(9));
    let s = c.stats();
    assert_eq!(anomalies(&s), [0; 4]);
    assert_eq!(s.counters.progress_notifications, 2);
    assert_eq!(s.counters.server_messages, 2);
    assert_eq!(s.counters.progress_calls, 1);
    // Timed from the call's due time, at its first notification only.
    assert_eq!(s.first_progress.len(), 1);
    let ms = s.first_progress.histogram().max() as f64 / 1000.0;
    assert!((6.9..=7.1).contains(&ms), "{ms} ms");
    assert_eq!(s.progress_per_call.len(), 1);
    assert_eq!(s.progress_per_call.max(), 2);
}

#[test]
fn progress_after_the_answer_is_after_result() {
    let (mut c, t0) = calls(1);
    progress(&mut c, "1", 1.0, t0);
    answer(&mut c, 1, t0);
    progress(&mut c, "1", 2.0, t0);
    progress(&mut c, "1", 3.0, t0);
    let s = c.stats();
    assert_eq!(anomalies(&s), [2, 0, 0, 0]);
    // Heard after the call ended: not among its notifications.
    assert_eq!(s.progress_per_call.max(), 1);
    assert_eq!(s.counters.progress_notifications, 3);
}

#[test]
fn progress_not_above_every_earlier_value_is_down() {
    let (mut c, t0) = calls(1);
    for (value, down) in [(1.0, 0), (0.5, 1), (1.0, 2), (1.5, 2), (1.5, 3), (2.0, 3)] {
        progress(&mut c, "1", value, t0);
        assert_eq!(c.stats().counters.progress_down, down, "after {value}");
    }
    answer(&mut c, 1, t0);
    let s = c.stats();
    assert_eq!(anomalies(&s), [0, 3, 0, 0]);
    assert_eq!(s.first_progress.len(), 1);
    assert_eq!(s.progress_per_call.max(), 6);
}

#[test]
fn a_token_never_issued_is_unknown() {
    let (mut c, t0) = calls(1);
    progress(&mut c, "99", 1.0, t0);
    progress(&mut c, r#""mcpload-unknown-token-1""#, 1.0, t0);
    progress(&mut c, "1.0", 1.0, t0);
    // A request that did not ask for progress issued no token.
    progress(&mut c, "100", 1.0, t0);
    // No token, no value, no params: nothing to follow.
    note(&mut c, r#"{"progress":1}"#, t0);
    note(&mut c, r#"{"progressToken":1}"#, t0);
    c.ingest(
        br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
        t0,
    );
    let s = c.stats();
    assert_eq!(anomalies(&s), [0, 0, 7, 0]);
    assert_eq!(s.counters.progress_notifications, 7);
    assert!(
        s.first_progress.is_empty(),
        "call 1 heard nothing of its own"
    );
}

#[test]
fn a_call_that_had_progress_then_ended_missing_is_then_missing() {
    let (mut c, t0) = calls(4);
    progress(&mut c, "1", 1.0, t0);
    progress(&mut c, "2", 1.0, t0);
    progress(&mut c, "3", 1.0, t0);
    assert_eq!(c.close_exchange(&[Id::Num(1), Id::Num(4)]), 2);
    assert!(c.end(&Id::Num(2), End::Timeout));
    assert!(c.end(&Id::Num(3), End::Transport));
    // Progress for a call given up on is no anomaly: the server may not know yet.
    progress(&mut c, "2", 2.0, t0);
    let s = c.stats();
    assert_eq!(anomalies(&s), [0, 0, 0, 1]);
    assert_eq!(s.counters.missing, 2);
    assert_eq!(s.counters.progress_calls, 4);
    assert_eq!(s.first_progress.len(), 3);
    assert_eq!(s.progress_per_call.len(), 4);
    assert_eq!(s.progress_per_call.min(), 0);
}

#[test]
fn calls_without_progress_leave_every_progress_figure_empty() {
    let (mut c, t0) = calls(0);
    answer(&mut c, 100, t0);
    let s = c.stats();
    assert_eq!(anomalies(&s), [0; 4]);
    assert_eq!(s.counters.progress_calls, 0);
    assert!(s.first_progress.is_empty() && s.progress_per_call.is_empty());
}
