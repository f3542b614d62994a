//! Writes the input of benches/merge.sh: COUNT segment folders of one 10-step closed-loop run,
//! 60 one-second intervals per step (10 minutes), two operations, written through the
//! library's own `RunFolder` from synthetic `Stats` (a seeded spread of latencies per second),
//! each folder then labelled as segment I of COUNT in summary.json.
//!
//! `cargo bench --bench merge_fixture -- DIR COUNT`

use mcpload::analysis::{StopCriteria, SweepJudge};
use mcpload::engine::{MeasuredStep, Second, SweepEnd};
use mcpload::metrics::{LatencyHistogram, Stats, StepFacts};
use mcpload::report::{Names, ProfileCopy, RunFolder, RunSpec};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, SystemTime};

const STEPS: u32 = 10;
const SECONDS: u32 = 60;
const OPS: [&str; 2] = ["echo", "tools/list"];

/// xorshift64*: a seeded stream of latencies, different per segment and second.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// One second at `level` users of segment `seg`: 40 calls per user to op 0, 10 to op 1.
fn second(rng: &mut Rng, level: u64) -> Stats {
    let mut s = Stats::default();
    for (op, per_user) in [(0u16, 40u64), (1, 10)] {
        let o = s.op_mut(op);
        let n = per_user * level;
        o.counters.requests = n;
        o.counters.responses = n;
        o.counters.ok = n;
        for _ in 0..n {
            // 1 ms .. ~33 ms with a long tail.
            let us = 1_000 + rng.next() % 8_000 + (rng.next() % 100).pow(2) * 2;
            o.latency.record(Duration::from_micros(us));
            o.service_latency.record(Duration::from_micros(us * 9 / 10));
        }
    }
    let mut s = s.fold_ops();
    s.counters.in_flight_max = level;
    s
}

fn write_segment(dir: &Path, index: u32, count: u32) {
    let levels: Vec<u64> = (1..=u64::from(STEPS)).collect();
    let mut spec = RunSpec::new(dir.to_owned(), "merge-bench");
    spec.settings = json!({
        "load": {"model": "closed", "levels": levels, "duration_s": f64::from(SECONDS)},
        "ops": OPS,
        "thresholds": [],
    });
    spec.profile = Some(ProfileCopy {
        source: "merge-bench.toml".into(),
        text: "name = \"merge-bench\"\n".into(),
    });
    spec.started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    spec.names = Names {
        ops: OPS.iter().map(|s| s.to_string()).collect(),
        scenarios: Vec::new(),
    };
    let mut judge = SweepJudge::new(StopCriteria::default());
    let mut run = RunFolder::create(spec).expect("create the run folder");
    run.set_protocol_revision("2025-06-18").unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(index));
    let mut t = Duration::ZERO;
    let mut windows = Vec::new();
    for step in 1..=STEPS {
        let level = u64::from(step);
        let mut stats = Stats::default();
        windows.push(
            json!({"step": step, "start_unix_ms": 1.8e12 + t.as_millis() as f64,
            "end_unix_ms": 1.8e12 + (t.as_millis() + u128::from(SECONDS) * 1000) as f64}),
        );
        for _ in 0..SECONDS {
            let s = second(&mut rng, level);
            run.record_second(&Second {
                step,
                start: t,
                length: Duration::from_secs(1),
                counters: &s.counters,
                in_flight: level,
                latency: &s.latency,
                ops: &s.ops,
                scenarios: &[],
                flows: None,
            })
            .unwrap();
            stats += &s;
            t += Duration::from_secs(1);
        }
        stats.counters.in_flight_max = level;
        let measured = MeasuredStep {
            facts: StepFacts::closed(step, level, f64::from(SECONDS)),
            stats,
            lag: LatencyHistogram::default(),
        };
        run.record_measured(&measured).unwrap();
        let judged = judge.judge(measured.facts, &measured.stats);
        run.record_step(&judged).unwrap();
    }
    run.record_end(&SweepEnd::Complete).unwrap();
    run.finish(Vec::new(), false).unwrap();
    let path = dir.join("summary.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    s["segment"] = json!({"index": index, "count": count, "start_at": "2027-01-15T08:00:00Z",
        "start_late_ms": 0.0, "steps": windows});
    std::fs::write(&path, serde_json::to_vec_pretty(&s).unwrap()).unwrap();
}

fn main() {
    // `cargo bench` passes `--bench` first; the rest are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let (Some(dir), Some(count)) = (args.first(), args.get(1).and_then(|c| c.parse().ok())) else {
        eprintln!("usage: cargo bench --bench merge_fixture -- DIR COUNT");
        std::process::exit(2);
    };
    for i in 1..=count {
        write_segment(&Path::new(dir).join(format!("segment-{i:03}")), i, count);
    }
}
