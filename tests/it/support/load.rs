//! A bounded closed-loop load through a transport, a Correlator and a Ledger, the way an
//! engine worker drives one, and the checks on what it counted.

use mcpload::correlator::{Correlator, Ledger, Sent};
use mcpload::jsonrpc::{self, Decoded, Id, Message, ResponseId};
use mcpload::metrics::Counters;
use mcpload::transport::{Event, Outgoing, Transport};
use std::time::{Duration, Instant};

/// What a bounded closed-loop run measured.
pub(crate) struct Outcome {
    pub counters: Counters,
    /// The ids the run used.
    pub ids: std::ops::Range<i64>,
    /// Ids of the responses that paired, in the order they were parsed.
    pub paired_order: Vec<i64>,
    pub down: bool,
}

/// Ids never repeat within a test binary, as within a run: a late answer or the end of an
/// exchange from an earlier load must not touch a later one.
static NEXT_ID: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);

/// Sends `total` requests with fresh integer ids, `window` in flight at once, built by
/// `make`; every request times out after `timeout` (then it is cancelled). Stops by itself:
/// every request ends one way or another.
pub(crate) async fn drive<T: Transport>(
    t: &mut T,
    total: u64,
    window: usize,
    timeout: Duration,
    make: impl Fn(Id) -> Outgoing,
) -> Outcome {
    drive_lingering(t, total, window, timeout, Duration::ZERO, make).await
}

/// [`drive`], then `linger` more reading what still comes (late answers).
pub(crate) async fn drive_lingering<T: Transport>(
    t: &mut T,
    total: u64,
    window: usize,
    timeout: Duration,
    linger: Duration,
    make: impl Fn(Id) -> Outgoing,
) -> Outcome {
    let mut c = Correlator::default();
    let mut ledger = Ledger::default();
    let first = NEXT_ID.fetch_add(total as i64, std::sync::atomic::Ordering::Relaxed);
    let ids = first..first + total as i64;
    let mut next = first;
    let started = Instant::now();
    let mut paired_order = Vec::new();
    let mut down = false;
    loop {
        while next < ids.end && c.in_flight() < window && !down {
            let now = Instant::now();
            let id = Id::Num(next);
            let sent = Sent {
                due: now,
                written: now,
                deadline: now + timeout,
            };
            c.register(id.clone(), sent).expect("fresh id");
            t.send(make(id));
            next += 1;
        }
        if c.in_flight() == 0 {
            break;
        }
        let deadline = c.next_deadline().expect("a request is pending");
        let event = tokio::select! {
            ev = t.next_event() => Some(ev),
            _ = tokio::time::sleep_until(deadline.into()) => None,
        };
        match event {
            Some(ev) => {
                if let Event::Message { bytes, .. } = &ev {
                    note_responses(bytes, &mut paired_order);
                }
                down |= ledger.apply(&mut c, ev).down;
            }
            None => {
                c.expire(Instant::now(), |id| t.cancel(id));
            }
        }
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{total} requests, {window} in flight: {:.2} s, {:.0} paired/s",
        elapsed.as_secs_f64(),
        c.stats().counters.responses as f64 / elapsed.as_secs_f64()
    );
    let until = tokio::time::Instant::now() + linger;
    while let Ok(ev) = tokio::time::timeout_at(until, t.next_event()).await {
        ledger.apply(&mut c, ev);
    }
    let mut counters = c.stats().counters.clone();
    t.take_counters(&mut counters);
    Outcome {
        counters,
        ids,
        paired_order,
        down,
    }
}

fn note_responses(bytes: &[u8], order: &mut Vec<i64>) {
    let mut note = |m: Result<Message<'_>, _>| {
        if let Ok(Message::Response(r)) = m
            && let ResponseId::Id(Id::Num(n)) = r.id
        {
            order.push(n);
        }
    };
    match jsonrpc::decode(bytes) {
        Ok(Decoded::Single(m)) => note(Ok(m)),
        Ok(Decoded::Batch(ms)) => ms
            .into_iter()
            .for_each(|raw| note(jsonrpc::decode_message(raw))),
        Err(_) => {}
    }
}

/// The pairing identity of docs/metrics.md, with nothing left in flight.
pub(crate) fn assert_identity(c: &Counters) {
    let ended = c.ok
        + c.errors
        + c.both_result_error
        + c.invalid_jsonrpc
        + c.missing
        + c.timeouts
        + c.http_429
        + c.http_503
        + c.http_other
        + c.transport_errors;
    assert_eq!(c.requests, ended, "pairing identity: {c:?}");
}

/// Every request paired `ok`, nothing anomalous.
pub(crate) fn assert_all_ok(c: &Counters, total: u64) {
    assert_identity(c);
    assert_eq!(c.requests, total, "{c:?}");
    assert_eq!(c.ok, total, "{c:?}");
    assert_eq!(c.responses, total, "{c:?}");
    assert_eq!(c.anomalies(), 0, "{c:?}");
    assert_eq!(c.missing + c.timeouts + c.transport_errors, 0, "{c:?}");
}

/// Sends `batches` batches of `size` requests made by `stamp` (all at once), and counts
/// until every request ended (each times out after `timeout`).
pub(crate) async fn drive_batches<T: Transport>(
    t: &mut T,
    batches: usize,
    size: usize,
    timeout: Duration,
    stamp: impl Fn(&mut Vec<u8>, &Id),
) -> Counters {
    let mut c = Correlator::default();
    let mut ledger = Ledger::default();
    let first = NEXT_ID.fetch_add(
        (batches * size) as i64,
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut writer = jsonrpc::BatchWriter::default();
    for b in 0..batches {
        writer.clear();
        let mut ids = Vec::with_capacity(size);
        for m in 0..size {
            let id = Id::Num(first + (b * size + m) as i64);
            stamp(writer.member(), &id);
            let now = Instant::now();
            let sent = Sent {
                due: now,
                written: now,
                deadline: now + timeout,
            };
            c.register(id.clone(), sent).expect("fresh id");
            ids.push(id);
        }
        c.batch_sent(size);
        let body = bytes::Bytes::copy_from_slice(writer.finish());
        t.send(Outgoing::batch(body, ids));
    }
    while c.in_flight() > 0 {
        let deadline = c.next_deadline().expect("a request is pending");
        tokio::select! {
            ev = t.next_event() => { ledger.apply(&mut c, ev); }
            _ = tokio::time::sleep_until(deadline.into()) => {
                c.expire(Instant::now(), |id| t.cancel(id));
            }
        }
    }
    c.stats().counters.clone()
}
