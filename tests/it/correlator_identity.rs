//! The pairing identity of docs/metrics.md, and every counter exactly, after random
//! interleavings, reorderings, batching, drops, duplicates, null ids and garbage.

use mcpload::correlator::{Correlator, End, Sent};
use mcpload::jsonrpc::Id;
use mcpload::transport::Cancelled;
use proptest::prelude::*;
use std::time::{Duration, Instant};

/// What the simulated server does with one request.
#[derive(Clone, Copy, Debug)]
enum Fate {
    Ok,
    Error,
    Both,
    BadVersion,
    /// Answered with a null id; the request then ends `missing` when its exchange closes.
    NullId,
    /// Never answered; ends `missing`.
    Drop,
    /// Answered twice.
    Duplicate,
    /// Times out, then the answer comes: `timeouts` + `late`.
    Late,
    /// Times out and is never answered.
    Timeout,
    /// Times out while still waiting for a connection: withdrawn unsent.
    ExpiredUnsent,
    Refused429,
    Refused503,
    RefusedOther,
    TransportError,
    /// Still pending when the step's figures are taken.
    InFlight,
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        6 => Just(Fate::Ok),
        1 => Just(Fate::Error),
        1 => Just(Fate::Both),
        1 => Just(Fate::BadVersion),
        1 => Just(Fate::NullId),
        1 => Just(Fate::Drop),
        1 => Just(Fate::Duplicate),
        1 => Just(Fate::Late),
        1 => Just(Fate::Timeout),
        1 => Just(Fate::ExpiredUnsent),
        1 => Just(Fate::Refused429),
        1 => Just(Fate::Refused503),
        1 => Just(Fate::RefusedOther),
        1 => Just(Fate::TransportError),
        1 => Just(Fate::InFlight),
    ]
}

fn response(id: i64, fate: Fate) -> String {
    match fate {
        Fate::Error => {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32000,"message":"x"}}}}"#)
        }
        Fate::Both => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{}},"error":{{"code":1,"message":"x"}}}}"#
        ),
        Fate::BadVersion => format!(r#"{{"jsonrpc":"1.0","id":{id},"result":{{}}}}"#),
        Fate::NullId => {
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}"#.into()
        }
        _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#),
    }
}

#[derive(Default, Debug, PartialEq)]
struct Expected {
    ok: u64,
    errors: u64,
    both: u64,
    invalid: u64,
    null_id: u64,
    missing: u64,
    duplicate: u64,
    late: u64,
    timeouts: u64,
    expired_unsent: u64,
    r429: u64,
    r503: u64,
    other: u64,
    transport: u64,
    in_flight: u64,
    unknown: u64,
    server: u64,
    parse: u64,
}

proptest! {
    // 1 000 cases of 10..40 requests each: at least 10 000 random exchanges per run.
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    #[test]
    fn identity_holds_and_every_counter_is_exact(
        fates in prop::collection::vec(fate(), 10..40),
        shuffle_seed in any::<u64>(),
        batch_every in 1usize..6,
        unknown in 0u64..3,
        server_messages in 0u64..3,
        garbage in 0u64..3,
    ) {
        let t0 = Instant::now();
        let mut c = Correlator::default();
        let mut exp = Expected::default();
        let timeout = Duration::from_secs(1);
        for (i, f) in fates.iter().enumerate() {
            let deadline = match f {
                Fate::Late | Fate::Timeout | Fate::ExpiredUnsent => t0 + timeout,
                _ => t0 + timeout * 10,
            };
            c.register(Id::Num(i as i64), Sent { due: t0, written: t0, deadline }).unwrap();
        }

        // Phase 1: the first answers, refusals and noise, in a random order, some in batches.
        let mut texts: Vec<String> = Vec::new();
        let mut ends: Vec<(i64, End)> = Vec::new();
        for (i, f) in fates.iter().enumerate() {
            let id = i as i64;
            match f {
                Fate::Ok | Fate::Duplicate => { texts.push(response(id, *f)); exp.ok += 1; }
                Fate::Error => { texts.push(response(id, *f)); exp.errors += 1; }
                Fate::Both => { texts.push(response(id, *f)); exp.both += 1; }
                Fate::BadVersion => { texts.push(response(id, *f)); exp.invalid += 1; }
                Fate::NullId => { texts.push(response(id, *f)); exp.null_id += 1; exp.missing += 1; }
                Fate::Drop => exp.missing += 1,
                Fate::Late => { exp.timeouts += 1; exp.late += 1; }
                Fate::Timeout => exp.timeouts += 1,
                Fate::ExpiredUnsent => exp.expired_unsent += 1,
                Fate::Refused429 => { ends.push((id, End::Http429)); exp.r429 += 1; }
                Fate::Refused503 => { ends.push((id, End::Http503)); exp.r503 += 1; }
                Fate::RefusedOther => { ends.push((id, End::HttpOther)); exp.other += 1; }
                Fate::TransportError => { ends.push((id, End::Transport)); exp.transport += 1; }
                Fate::InFlight => exp.in_flight += 1,
            }
        }
        for k in 0..unknown {
            texts.push(response(1_000_000 + k as i64, Fate::Ok));
            exp.unknown += 1;
        }
        for _ in 0..server_messages {
            texts.push(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#.into());
            exp.server += 1;
        }
        for _ in 0..garbage {
            texts.push("\u{1}garbage{".into());
            exp.parse += 1;
        }
        let mut rng = shuffle_seed | 1;
        shuffle(&mut texts, &mut rng);
        // Garbage cannot ride in a batch (it would spoil the whole array): send it alone.
        let (noise, members): (Vec<_>, Vec<_>) = texts.into_iter().partition(|t| t.starts_with('\u{1}'));
        for chunk in members.chunks(batch_every) {
            if chunk.len() == 1 {
                c.ingest(chunk[0].as_bytes(), t0);
            } else {
                c.ingest(format!("[{}]", chunk.join(",")).as_bytes(), t0);
            }
        }
        for n in &noise {
            c.ingest(n.as_bytes(), t0);
        }
        for (id, end) in ends {
            prop_assert!(c.end(&Id::Num(id), end));
        }

        // Phase 2: deadlines pass.
        let timed_out = c.expire(t0 + timeout, |id| match id {
            Id::Num(i) if matches!(fates[*i as usize], Fate::ExpiredUnsent) => Cancelled::Unsent,
            _ => Cancelled::Sent,
        });
        prop_assert_eq!(timed_out as u64, exp.timeouts + exp.expired_unsent);

        // Phase 3: late answers and second copies, shuffled.
        let mut second: Vec<String> = Vec::new();
        for (i, f) in fates.iter().enumerate() {
            match f {
                Fate::Duplicate => { second.push(response(i as i64, *f)); exp.duplicate += 1; }
                Fate::Late => second.push(response(i as i64, *f)),
                _ => {}
            }
        }
        shuffle(&mut second, &mut rng);
        for t in &second {
            c.ingest(t.as_bytes(), t0 + timeout * 2);
        }

        // Phase 4: the exchanges of dropped and null-id-answered requests close.
        let closing: Vec<Id> = fates.iter().enumerate()
            .filter(|(_, f)| matches!(f, Fate::Drop | Fate::NullId))
            .map(|(i, _)| Id::Num(i as i64)).collect();
        prop_assert_eq!(c.close_exchange(&closing) as u64, exp.missing);

        let k = &c.stats().counters;
        let in_flight_at_end = c.in_flight() as u64;
        prop_assert_eq!(k.requests, fates.len() as u64);
        prop_assert_eq!(
            k.requests,
            k.ok + k.errors + k.both_result_error + k.invalid_jsonrpc + k.missing + k.timeouts
                + k.http_429 + k.http_503 + k.http_other + k.transport_errors + k.expired_unsent
                + in_flight_at_end
        );
        let got = Expected {
            ok: k.ok, errors: k.errors, both: k.both_result_error, invalid: k.invalid_jsonrpc,
            null_id: k.null_id, missing: k.missing, duplicate: k.duplicate_id, late: k.late,
            timeouts: k.timeouts, expired_unsent: k.expired_unsent, r429: k.http_429, r503: k.http_503, other: k.http_other,
            transport: k.transport_errors, in_flight: in_flight_at_end, unknown: k.unknown_id,
            server: k.server_messages, parse: k.parse_errors,
        };
        prop_assert_eq!(got, exp);
        prop_assert_eq!(c.stats().latency.len(), k.responses);
    }
}

/// Fisher–Yates with a xorshift generator seeded by proptest, so failures shrink and replay.
fn shuffle<T>(v: &mut [T], state: &mut u64) {
    for i in (1..v.len()).rev() {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let j = (*state % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}
