//! A synthetic sweep written through the real `RunFolder`, shared by the report and analysis
//! tests: a server of capacity 8 with a 10 ms service time, swept from 1 to 32 concurrent
//! clients, failing at 32 with HTTP 429s, with a few anomalies and error responses on the way.

use mcpload::analysis::{StopCriteria, SweepJudge, Thresholds};
use mcpload::engine::{Second, SweepEnd};
use mcpload::metrics::{Counters, Stats, StepFacts};
use mcpload::report::{Finished, ProfileCopy, RunFolder, RunSpec};
use std::path::Path;
use std::time::{Duration, SystemTime};

pub(crate) const SECONDS_PER_STEP: u32 = 3;
pub(crate) const CONCURRENCY: [u64; 6] = [1, 2, 4, 8, 16, 32];

/// The counts and latencies of one second at concurrency `n`, with the service time
/// multiplied by `slowdown`.
fn second(n: u64, i: u32, slowdown: f64) -> Stats {
    let mut s = Stats::default();
    let capacity = 8.0;
    let service_s = 0.010 * slowdown;
    let throughput = (n as f64).min(capacity) / service_s;
    // Little's law: mean response time = N / X.
    let mean_us = n as f64 / throughput * 1e6;
    let paired = throughput as u64;
    let c: &mut Counters = &mut s.counters;
    let mut rejected = 0;
    if n == 32 {
        // Past the queue the server refuses 40% of requests.
        rejected = paired * 2 / 3;
        c.http_429 = rejected;
        c.retry_after_max_s = 1;
        c.unknown_id = 1;
        c.late = 1;
        c.errors = 5;
        c.errors_by_code.insert(-32603, 5);
    }
    if n == 8 && i == 1 {
        c.duplicate_id = 1;
    }
    c.requests = paired + rejected;
    c.responses = paired;
    c.ok = paired - c.errors;
    c.in_flight_max = n;
    for k in 0..paired {
        // Spread evenly over 0.5..1.5 of the mean, plus a tail: every 100th 4× the mean.
        let f = 0.5 + k as f64 / paired as f64;
        let f = if k % 100 == 99 { 4.0 } else { f };
        s.latency
            .record(Duration::from_micros((mean_us * f) as u64));
    }
    s
}

/// Writes the whole sweep into `dir` and finishes the run.
pub(crate) fn synthetic_run(dir: &Path, thresholds: &[&str]) -> Finished {
    synthetic_run_slowed(dir, thresholds, 1.0)
}

/// [`synthetic_run`] against a server whose service time is `slowdown` times longer.
pub(crate) fn synthetic_run_slowed(dir: &Path, thresholds: &[&str], slowdown: f64) -> Finished {
    let mut spec = RunSpec::new(dir.to_owned(), "synthetic sweep");
    spec.settings = serde_json::json!({
        "target": {
            "url": "http://alice:s3cret@127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer tok-123", "X-Trace": "on"}
        },
        "sweep": {"concurrency": CONCURRENCY},
        "timeout_ms": 5000
    });
    spec.redact = vec!["/target/headers/X-Trace".to_owned()];
    spec.profile = Some(ProfileCopy {
        source: "profiles/sweep.toml".to_owned(),
        text: "# the profile\nname = \"synthetic sweep\"\n".to_owned(),
    });
    spec.criteria = StopCriteria::default();
    spec.started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut judge = SweepJudge::new(spec.criteria.clone());
    let mut run = RunFolder::create(spec).expect("create the run folder");
    run.set_protocol_revision("2025-06-18").unwrap();
    let mut t = Duration::ZERO;
    for (k, &n) in CONCURRENCY.iter().enumerate() {
        let step = k as u32 + 1;
        let mut stats = Stats::default();
        for i in 0..SECONDS_PER_STEP {
            let s = second(n, i, slowdown);
            run.record_second(&Second {
                step,
                start: t,
                length: Duration::from_secs(1),
                counters: &s.counters,
                in_flight: n,
                latency: &s.latency,
            })
            .unwrap();
            stats += &s;
            t += Duration::from_secs(1);
        }
        let judged = judge.judge(
            StepFacts::closed(step, n, f64::from(SECONDS_PER_STEP)),
            &stats,
        );
        run.record_step(&judged).unwrap();
        if judged.stop() {
            break;
        }
    }
    let thresholds = Thresholds::parse(thresholds).unwrap();
    run.record_end(&SweepEnd::Complete).unwrap();
    let s = run.summary();
    let gates = thresholds.evaluate(&s.step_figures(), &s.knee);
    run.finish(gates, false).unwrap()
}
