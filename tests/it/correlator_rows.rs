//! Every row of both docs/metrics.md tables, one exchange each, against the real correlator.

use mcpload::correlator::{Class, Collision, Correlator, End, Sent};
use mcpload::jsonrpc::Id;
use mcpload::transport::Cancelled;
use std::time::{Duration, Instant};

fn sent(at: Instant) -> Sent {
    Sent {
        due: at,
        written: at,
        deadline: at + Duration::from_secs(5),
    }
}

/// A correlator with requests 1..=n registered at `t0`.
fn with_pending(n: i64) -> (Correlator, Instant) {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    for i in 1..=n {
        c.register(Id::Num(i), sent(t0)).unwrap();
    }
    (c, t0)
}

fn one(body: &str) -> (Correlator, Class) {
    let (mut c, t0) = with_pending(1);
    let m = mcpload::jsonrpc::decode(body.as_bytes());
    let class = match m {
        Ok(mcpload::jsonrpc::Decoded::Single(m)) => c.classify(Ok(m), t0),
        Ok(mcpload::jsonrpc::Decoded::Batch(_)) => panic!("not a batch"),
        Err(e) => c.classify(Err(e), t0),
    };
    (c, class)
}

#[test]
fn first_table_each_incoming_message_is_counted_once() {
    let cases: &[(&str, Class)] = &[
        (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, Class::Ok),
        (r#"{"jsonrpc":"2.0","id":1,"result":null}"#, Class::Ok),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            Class::Error,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#,
            Class::BothResultError,
        ),
        (r#"{"id":1,"result":{}}"#, Class::InvalidJsonrpc),
        (
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            Class::InvalidJsonrpc,
        ),
        (
            r#"{"jsonrpc":2.0,"id":1,"result":{}}"#,
            Class::InvalidJsonrpc,
        ),
        (r#"{"jsonrpc":"2.0","id":1}"#, Class::InvalidJsonrpc),
        // A member given twice: which copy holds is unknowable.
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            Class::InvalidJsonrpc,
        ),
        (r#"{"jsonrpc":"2.0","id":99,"result":{}}"#, Class::UnknownId),
        (
            r#"{"jsonrpc":"2.0","id":"1","result":{}}"#,
            Class::UnknownId,
        ),
        (r#"{"jsonrpc":"2.0","id":null,"result":{}}"#, Class::NullId),
        (
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
            Class::NullId,
        ),
        (
            r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"x"}}"#,
            Class::NullId,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            Class::ServerMessage,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"}"#,
            Class::ServerMessage,
        ),
        ("not json", Class::ParseError),
        (r#"{"jsonrpc":"2.0","id":1,"result":"#, Class::ParseError),
        ("42", Class::ParseError),
        (r#"{"hello":"world"}"#, Class::ParseError),
        // A number none of our ids can be answers no request of ours (docs/metrics.md,
        // hostile servers).
        (
            r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            Class::UnknownId,
        ),
        (r#"{"jsonrpc":"2.0","id":-0,"result":{}}"#, Class::UnknownId),
        (
            r#"{"jsonrpc":"2.0","id":true,"result":{}}"#,
            Class::ParseError,
        ),
    ];
    for (body, want) in cases {
        let (c, got) = one(body);
        assert_eq!(got, *want, "{body}");
        let counters = &c.stats().counters;
        // The ten classes: ok, errors, the seven anomalies, server messages.
        let total = counters.ok + counters.errors + counters.anomalies() + counters.server_messages;
        assert_eq!(total, 1, "{body} counted once: {counters:?}");
        assert_eq!(c.in_flight(), if want.pairs() { 0 } else { 1 }, "{body}");
    }
}

#[test]
fn errors_are_counted_by_code() {
    let (mut c, t0) = with_pending(3);
    for (id, code) in [(1, -32601), (2, -32601), (3, 7)] {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"m"}}}}"#);
        c.ingest(body.as_bytes(), t0);
    }
    let by_code = &c.stats().counters.errors_by_code;
    assert_eq!(by_code.get(&-32601), Some(&2));
    assert_eq!(by_code.get(&7), Some(&1));
    assert_eq!(c.stats().counters.errors, 3);
}

#[test]
fn a_second_answer_is_a_duplicate_and_an_answer_after_timeout_is_late() {
    let (mut c, t0) = with_pending(2);
    c.ingest(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t0);
    c.ingest(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t0);
    let mut cancelled = Vec::new();
    let n = c.expire(t0 + Duration::from_secs(6), |id| {
        cancelled.push(id.clone());
        Cancelled::Sent
    });
    assert_eq!((n, cancelled), (1, vec![Id::Num(2)]));
    c.ingest(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#, t0);
    let k = &c.stats().counters;
    assert_eq!((k.ok, k.duplicate_id, k.timeouts, k.late), (1, 1, 1, 1));
}

#[test]
fn expire_only_ends_requests_past_their_deadline() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    for (i, secs) in [(1, 3), (2, 1), (3, 2)] {
        let s = Sent {
            deadline: t0 + Duration::from_secs(secs),
            ..sent(t0)
        };
        c.register(Id::Num(i), s).unwrap();
    }
    let mut order = Vec::new();
    c.expire(t0 + Duration::from_millis(2500), |id| {
        order.push(id.clone());
        Cancelled::Sent
    });
    assert_eq!(order, vec![Id::Num(2), Id::Num(3)]);
    assert_eq!(c.in_flight(), 1);
}

#[test]
fn a_pending_id_cannot_be_registered_twice() {
    let (mut c, t0) = with_pending(1);
    assert_eq!(c.register(Id::Num(1), sent(t0)), Err(Collision(Id::Num(1))));
    assert_eq!(c.stats().counters.requests, 1);
    c.ingest(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t0);
    // Once ended, the id may be used again.
    assert!(c.register(Id::Num(1), sent(t0)).is_ok());
}

#[test]
fn second_table_each_unpaired_end_is_counted_once() {
    let ends = [
        (End::Missing, "missing"),
        (End::Timeout, "timeouts"),
        (End::Http429, "http_429"),
        (End::Http503, "http_503"),
        (End::HttpOther, "http_other"),
        (End::Transport, "transport_errors"),
    ];
    for (end, name) in ends {
        let (mut c, _) = with_pending(1);
        assert!(c.end(&Id::Num(1), end));
        assert!(!c.end(&Id::Num(1), end), "a request ends once");
        let k = &c.stats().counters;
        let got = [
            k.missing,
            k.timeouts,
            k.http_429,
            k.http_503,
            k.http_other,
            k.transport_errors,
        ];
        assert_eq!(got.iter().sum::<u64>(), 1, "{name}");
        assert_eq!(k.ended(), 1);
        let v = serde_json::to_value(k).unwrap();
        assert_eq!(v[name], 1, "{name}");
    }
}

#[test]
fn a_closed_exchange_ends_its_unanswered_requests_as_missing() {
    let (mut c, t0) = with_pending(3);
    let batch = br#"[{"jsonrpc":"2.0","id":3,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]"#;
    let got = c.ingest(batch, t0);
    assert!(got.batch);
    assert_eq!(got.non_null_responses, 2);
    c.batch_sent(3);
    c.batch_answered(3, got.non_null_responses);
    let ids = [Id::Num(1), Id::Num(2), Id::Num(3)];
    assert_eq!(c.close_exchange(&ids), 1);
    let k = &c.stats().counters;
    assert_eq!(
        (k.ok, k.missing, k.batches, k.response_count_mismatch),
        (2, 1, 1, 1)
    );
    assert_eq!(c.stats().batch_size.max(), 3);
}

#[test]
fn a_batch_member_that_is_not_an_object_spoils_only_itself() {
    let (mut c, t0) = with_pending(2);
    let got = c.ingest(
        br#"[{"jsonrpc":"2.0","id":1,"result":{}}, 7, {"jsonrpc":"2.0","id":2,"result":{}}]"#,
        t0,
    );
    assert_eq!((got.messages, got.non_null_responses), (3, 2));
    let k = &c.stats().counters;
    assert_eq!((k.ok, k.parse_errors), (2, 1));
}

#[test]
fn an_empty_array_is_no_message() {
    let (mut c, t0) = with_pending(1);
    c.ingest(b"[]", t0);
    assert_eq!(c.stats().counters.parse_errors, 1);
}

#[test]
fn latency_runs_from_due_and_service_latency_from_the_write() {
    let mut c = Correlator::default();
    let due = Instant::now();
    let written = due + Duration::from_millis(300);
    let s = Sent {
        due,
        written,
        deadline: due + Duration::from_secs(5),
    };
    c.register(Id::Num(1), s).unwrap();
    c.ingest(
        br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        written + Duration::from_millis(10),
    );
    let st = c.stats();
    let lat = st.latency.histogram().max();
    let svc = st.service_latency.histogram().max();
    assert!((309_000..=311_000).contains(&lat), "{lat}");
    assert!((9_990..=10_010).contains(&svc), "{svc}");
}

#[test]
fn ended_ids_are_forgotten_past_the_window() {
    let mut c = Correlator::new(4);
    let t0 = Instant::now();
    for i in 1..=6 {
        c.register(Id::Num(i), sent(t0)).unwrap();
        let body = format!(r#"{{"jsonrpc":"2.0","id":{i},"result":{{}}}}"#);
        c.ingest(body.as_bytes(), t0);
    }
    // 3..=6 are remembered, 1 and 2 are not.
    c.ingest(br#"{"jsonrpc":"2.0","id":6,"result":{}}"#, t0);
    c.ingest(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t0);
    let k = &c.stats().counters;
    assert_eq!((k.duplicate_id, k.unknown_id), (1, 1));
}

#[test]
fn stats_merge_by_adding_counts_and_histograms() {
    let (mut a, t0) = with_pending(2);
    let (mut b, _) = with_pending(1);
    a.ingest(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t0);
    a.ingest(
        br#"{"jsonrpc":"2.0","id":2,"error":{"code":5,"message":""}}"#,
        t0,
    );
    b.ingest(
        br#"{"jsonrpc":"2.0","id":1,"error":{"code":5,"message":""}}"#,
        t0,
    );
    b.retry_after(9);
    let mut total = a.take_stats();
    total += &b.stats();
    assert_eq!(total.counters.requests, 3);
    assert_eq!(total.counters.errors_by_code.get(&5), Some(&2));
    assert_eq!(total.counters.retry_after_max_s, 9);
    assert_eq!(total.latency.len(), 3);
    assert_eq!(a.stats().counters.requests, 0, "take_stats starts afresh");
}

#[test]
fn more_requests_in_flight_than_the_window_all_pair() {
    let mut c = Correlator::new(4);
    let t0 = Instant::now();
    let n = 10_000;
    for i in 0..n {
        c.register(Id::Num(i * 3), sent(t0)).unwrap();
    }
    c.register(Id::from("named"), sent(t0)).unwrap();
    for i in (0..n).rev() {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, i * 3);
        assert_eq!(c.ingest(body.as_bytes(), t0).non_null_responses, 1);
    }
    c.ingest(br#"{"jsonrpc":"2.0","id":"named","result":{}}"#, t0);
    let k = &c.stats().counters;
    assert_eq!((k.ok, k.unknown_id), (n as u64 + 1, 0));
    assert_eq!(k.in_flight_max, n as u64 + 1);
    assert_eq!(c.in_flight(), 0);
}

#[test]
fn a_straggler_outlasting_a_turn_of_the_ring_stays_known() {
    let mut c = Correlator::new(4);
    let t0 = Instant::now();
    // 0 and 1 stay pending while 98 newer ids go round the 4-slot ring many times.
    c.register(Id::Num(0), sent(t0)).unwrap();
    c.register(Id::Num(1), sent(t0)).unwrap();
    for i in 2..100 {
        c.register(Id::Num(i), sent(t0)).unwrap();
        let body = format!(r#"{{"jsonrpc":"2.0","id":{i},"result":{{}}}}"#);
        c.ingest(body.as_bytes(), t0);
    }
    assert_eq!(c.in_flight(), 2);
    assert!(
        c.register(Id::Num(0), sent(t0)).is_err(),
        "0 is still pending"
    );
    c.ingest(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#, t0);
    c.ingest(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#, t0);
    assert!(c.end(&Id::Num(1), End::Missing));
    c.ingest(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t0);
    let k = &c.stats().counters;
    assert_eq!(
        (k.ok, k.duplicate_id, k.missing, k.late, k.unknown_id),
        (99, 1, 1, 1, 0)
    );
    assert_eq!(c.in_flight(), 0);
}
