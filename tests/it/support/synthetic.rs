//! Synthetic sweeps written through the real `RunFolder`, shared by the report and analysis
//! tests: a server of capacity 8 with a 10 ms service time, swept from 1 to 32 concurrent
//! clients, failing at 32 with HTTP 429s, with a few anomalies and error responses on the way;
//! and a workflow sweep of two operations and one scenario.

use mcpload::analysis::{JudgedStep, StopCriteria, SweepJudge, Thresholds};
use mcpload::engine::{Second, SweepEnd};
use mcpload::metrics::{Counters, ScenarioNames, Stats, StepFacts};
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
    let judge = SweepJudge::new(spec.criteria.clone());
    sweep(
        spec,
        judge,
        &CONCURRENCY,
        thresholds,
        |n, i| second(n, i, slowdown),
        |_, _| {},
    )
}

/// Records a sweep over `levels` through a new run folder (each step `SECONDS_PER_STEP`
/// seconds of `second(level, i)`), calling `after_step` once each step is recorded, and
/// finishes it with `thresholds` checked.
fn sweep(
    spec: RunSpec,
    mut judge: SweepJudge,
    levels: &[u64],
    thresholds: &[&str],
    second: impl Fn(u64, u32) -> Stats,
    mut after_step: impl FnMut(&RunFolder, &JudgedStep),
) -> Finished {
    let mut run = RunFolder::create(spec).expect("create the run folder");
    run.set_protocol_revision("2025-06-18").unwrap();
    let mut t = Duration::ZERO;
    for (k, &n) in levels.iter().enumerate() {
        let step = k as u32 + 1;
        let mut stats = Stats::default();
        for i in 0..SECONDS_PER_STEP {
            let s = second(n, i);
            run.record_second(&Second {
                step,
                start: t,
                length: Duration::from_secs(1),
                counters: &s.counters,
                in_flight: n,
                latency: &s.latency,
                ops: &s.ops,
                scenarios: &[],
                flows: None,
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
        after_step(&run, &judged);
        if judged.stop() {
            break;
        }
    }
    let thresholds = Thresholds::parse(thresholds).unwrap();
    run.record_end(&SweepEnd::Complete).unwrap();
    let gates = run.summary().evaluate_gates(&thresholds);
    run.finish(gates, false).unwrap()
}

/// The operations of [`workflow_run`], by operation number.
pub(crate) const WORKFLOW_OPS: [&str; 2] = ["search", "write"];
pub(crate) const WORKFLOW_LEVELS: [u64; 3] = [1, 2, 4];

/// One second of [`workflow_run`] at `n` clients: `search` (10 per client, 5 ms), `write` (2
/// per client, 20 ms; at 4 clients one in eight answered with an error), an `unknown_id` and
/// two server messages that belong to no request, and the scenario `jobs` (steps `create`
/// and `wait`, 3 polls each): `n` iterations of 100 ms, from 4 clients one failing in
/// `wait` on an expect.
fn workflow_second(n: u64) -> Stats {
    let mut s = Stats::default();
    for (op, per_client, ms) in [(0u16, 10, 5), (1, 2, 20)] {
        let o = s.op_mut(op);
        let sent = per_client * n;
        let errors = if op == 1 && n == 4 { sent / 8 } else { 0 };
        o.counters.requests = sent;
        o.counters.responses = sent;
        o.counters.ok = sent - errors;
        o.counters.errors = errors;
        for _ in 0..sent {
            o.latency.record(Duration::from_millis(ms));
        }
    }
    let mut step = Stats::default();
    for o in &s.ops {
        step.counters += &o.counters;
        step.latency += &o.latency;
    }
    s.counters = step.counters;
    s.latency = step.latency;
    let errors = s.counters.errors;
    if errors > 0 {
        s.counters.errors_by_code.insert(-32603, errors);
    }
    s.counters.unknown_id = 1;
    s.counters.server_messages = 2;
    let jobs = s.scenario_mut(0);
    let failed = u64::from(n >= 4);
    jobs.iterations.started = n;
    for _ in 0..n - failed {
        jobs.iterations.completed(Duration::from_millis(100));
        jobs.iterations.polled(3);
    }
    let create = jobs.part_mut(0);
    create.started = n;
    for _ in 0..n {
        create.completed(Duration::from_millis(10));
    }
    let wait = jobs.part_mut(1);
    wait.started = n;
    for _ in 0..n - failed {
        wait.completed(Duration::from_millis(90));
        wait.polled(3);
    }
    for _ in 0..failed {
        jobs.iterations.failed("expect status == \"done\"");
        jobs.part_mut(1).failed("expect status == \"done\"");
    }
    s
}

/// A sweep of 1, 2 and 4 clients running two operations ([`WORKFLOW_OPS`]) and the scenario
/// `jobs` ([`workflow_second`]); `after_step` sees the folder after each step is recorded.
pub(crate) fn workflow_run(
    dir: &Path,
    thresholds: &[&str],
    after_step: impl FnMut(&RunFolder, &JudgedStep),
) -> Finished {
    let mut spec = RunSpec::new(dir.to_owned(), "workflow sweep");
    spec.started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    // Judged by iterations, a failed one in four is a failed step; the sweep is run whole.
    spec.criteria = StopCriteria {
        max_error_rate: 0.5,
        ..StopCriteria::default()
    };
    let judge = SweepJudge::new(spec.criteria.clone())
        .naming_ops(WORKFLOW_OPS.map(str::to_owned).to_vec())
        .naming_scenarios(vec![ScenarioNames {
            scenario: "jobs".to_owned(),
            steps: vec!["create".to_owned(), "wait".to_owned()],
        }]);
    sweep(
        spec,
        judge,
        &WORKFLOW_LEVELS,
        thresholds,
        |n, _| workflow_second(n),
        after_step,
    )
}
