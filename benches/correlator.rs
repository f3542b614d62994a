//! Criterion microbenchmarks of the correlator's hot path: register a request, then pair its
//! response, with 1, 1 000, 10 000 and 100 000 requests in flight, in order and shuffled.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mcpload::correlator::{Correlator, Sent};
use mcpload::jsonrpc::{Id, Message, Response, ResponseId};
use mcpload::transport::Cancelled;
use serde_json::value::RawValue;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Virtual time per request, and the timeout: about 100 000 deadlines stay queued, as in a
/// run at 100 000 requests/s with a 1 s timeout.
const TICK: Duration = Duration::from_nanos(10_000);
const TIMEOUT: Duration = Duration::from_secs(1);

struct Steady {
    c: Correlator,
    slots: Vec<i64>,
    next_id: i64,
    now: Instant,
    rng: u64,
    result: Box<RawValue>,
}

impl Steady {
    fn new(in_flight: usize) -> Self {
        let mut s = Steady {
            c: Correlator::default(),
            slots: Vec::with_capacity(in_flight),
            next_id: 0,
            now: Instant::now(),
            rng: 0x9E37_79B9_7F4A_7C15,
            result: RawValue::from_string(r#"{"content":[]}"#.into()).unwrap(),
        };
        for _ in 0..in_flight {
            let id = s.register();
            s.slots.push(id);
        }
        s
    }

    fn register(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.now += TICK;
        let sent = Sent {
            due: self.now,
            written: self.now,
            deadline: self.now + TIMEOUT,
        };
        self.c.register(Id::Num(id), sent).unwrap();
        id
    }

    /// Pairs the request in `slot` and registers a fresh one in its place.
    #[inline]
    fn step(&mut self, slot: usize) {
        let id = self.slots[slot];
        let msg = Message::Response(Response {
            id: ResponseId::Id(Id::Num(id)),
            well_formed: true,
            result: Some(&self.result),
            error: None,
        });
        black_box(self.c.classify(Ok(msg), self.now));
        self.slots[slot] = self.register();
        if self.next_id % 1024 == 0 {
            self.c.expire(self.now, |_| Cancelled::Sent);
        }
    }

    fn random_slot(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % self.slots.len() as u64) as usize
    }
}

fn register_then_pair(c: &mut Criterion) {
    let mut g = c.benchmark_group("register_then_pair");
    g.throughput(Throughput::Elements(1));
    for in_flight in [1usize, 1_000, 10_000, 100_000] {
        g.bench_with_input(
            BenchmarkId::new("in_order", in_flight),
            &in_flight,
            |b, &n| {
                let mut s = Steady::new(n);
                let mut oldest = 0;
                b.iter(|| {
                    s.step(oldest);
                    oldest = (oldest + 1) % n;
                });
            },
        );
        g.bench_with_input(
            BenchmarkId::new("shuffled", in_flight),
            &in_flight,
            |b, &n| {
                let mut s = Steady::new(n);
                b.iter(|| {
                    let slot = s.random_slot();
                    s.step(slot);
                });
            },
        );
    }
    g.finish();
}

criterion_group!(benches, register_then_pair);
criterion_main!(benches);
