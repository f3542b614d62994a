//! The correlator fed arbitrary interleavings of sends, answers (good, bad, batched, for known,
//! ended and unknown ids), exchange ends, refusals and timeouts. After every step the pairing
//! identity of docs/metrics.md holds: requests = every end + in flight.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpload::correlator::{Correlator, End, Sent};
use mcpload::jsonrpc::Id;
use mcpload::transport::Cancelled;
use std::time::{Duration, Instant};

#[derive(Arbitrary, Debug)]
enum IdPick {
    Num(u8),
    Str(u8),
}

impl IdPick {
    fn id(&self) -> Id {
        match self {
            IdPick::Num(n) => Id::Num(i64::from(*n)),
            IdPick::Str(n) => Id::Str(format!("s{n}").into()),
        }
    }
    fn json(&self) -> String {
        match self {
            IdPick::Num(n) => n.to_string(),
            IdPick::Str(n) => format!("\"s{n}\""),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Answer {
    Result(IdPick),
    Error(IdPick),
    Both(IdPick),
    NoVersion(IdPick),
    NullId,
    Notification,
    Garbage(Vec<u8>),
}

impl Answer {
    fn text(&self) -> Vec<u8> {
        match self {
            Answer::Result(i) => format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, i.json()),
            Answer::Error(i) => format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-1,"message":""}}}}"#,
                i.json()
            ),
            Answer::Both(i) => format!(
                r#"{{"jsonrpc":"2.0","id":{},"result":1,"error":{{"code":1,"message":""}}}}"#,
                i.json()
            ),
            Answer::NoVersion(i) => format!(r#"{{"id":{},"result":{{}}}}"#, i.json()),
            Answer::NullId => r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":""}}"#.into(),
            Answer::Notification => r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#.into(),
            Answer::Garbage(b) => return b.clone(),
        }
        .into_bytes()
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Send { id: IdPick, timeout_ms: u8 },
    Answer(Answer),
    Batch(Vec<Answer>),
    End { id: IdPick, end: u8 },
    CloseExchange(Vec<IdPick>),
    Advance(u8),
    EndAll,
    Window(u8),
}

fuzz_target!(|ops: Vec<Op>| {
    let mut now = Instant::now();
    // A small window (the logic does not depend on its size): the ring wraps, stragglers
    // leave it and it grows within a few hundred operations, and each input runs fast.
    let mut c = Correlator::new(64);
    for op in ops.iter().take(512) {
        match op {
            Op::Send { id, timeout_ms } => {
                let sent = Sent {
                    due: now,
                    written: now,
                    deadline: now + Duration::from_millis(u64::from(*timeout_ms)),
                };
                let _ = c.register(id.id(), sent);
            }
            Op::Answer(a) => {
                c.ingest(&a.text(), now);
            }
            Op::Batch(members) => {
                let texts: Vec<Vec<u8>> = members.iter().take(16).map(Answer::text).collect();
                let batch = [&b"["[..], &texts.join(&b","[..]), b"]"].concat();
                c.ingest(&batch, now);
            }
            Op::End { id, end } => {
                let end = [End::Missing, End::Http429, End::Http503, End::HttpOther, End::Transport]
                    [usize::from(*end) % 5];
                c.end(&id.id(), end);
            }
            Op::CloseExchange(ids) => {
                let ids: Vec<Id> = ids.iter().map(IdPick::id).collect();
                c.close_exchange(&ids);
            }
            Op::Advance(ms) => {
                now += Duration::from_millis(u64::from(*ms));
                // An odd step stands for requests still waiting for a connection.
                let gone = if ms % 2 == 1 { Cancelled::Unsent } else { Cancelled::Sent };
                c.expire(now, |_| gone);
            }
            Op::EndAll => {
                c.end_all(End::Missing);
            }
            Op::Window(n) => {
                // A fresh correlator with a tiny window of ended ids: stragglers and the ring's
                // growth paths get exercised.
                c = Correlator::new(usize::from(*n) + 1);
            }
        }
        let k = &c.stats().counters;
        assert_eq!(
            k.requests,
            k.ended() + c.in_flight() as u64,
            "identity broken after {op:?}: {k:?}"
        );
    }
});
