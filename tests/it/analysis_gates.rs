//! Threshold gates: parsing with clear errors, evaluation over steps and the knee, and the
//! exit codes of `mcpload report DIR --threshold ...` (0 all hold, 1 one fails, 2 usage).

use crate::support::mcpload;
use crate::support::scratch::scratch;
use crate::support::synthetic::{synthetic_run, workflow_run};
use mcpload::analysis::{GateError, Knee, RunFigures, StopCriteria, Threshold, Thresholds, judge};
use mcpload::metrics::{Stats, StepFacts, StepSummary};
use std::time::Duration;

/// A closed-loop step: `ok` answers at `latency_ms`, `failed` HTTP 429s.
fn step(n: u32, ok: u64, failed: u64, latency_ms: u64) -> StepSummary {
    let mut stats = Stats::default();
    let c = &mut stats.counters;
    c.requests = ok + failed;
    c.responses = ok;
    c.ok = ok;
    c.http_429 = failed;
    c.retry_after_max_s = 2;
    for _ in 0..ok {
        stats.latency.record(Duration::from_millis(latency_ms));
    }
    StepSummary::new(StepFacts::closed(n, 1 << n, 1.0), &stats)
}

/// The figures of a run of `steps` alone, without operation or scenario rows.
fn figures<'a>(steps: &'a [StepSummary], knee: &'a Knee) -> RunFigures<'a> {
    RunFigures {
        steps,
        ops: &[],
        scenarios: &[],
        knee,
        checks: &[],
    }
}

fn judged(mut steps: Vec<StepSummary>) -> (Vec<StepSummary>, Knee) {
    for i in 0..steps.len() {
        let prev = i.checked_sub(1).map(|p| steps[p].clone());
        steps[i].verdict = judge(&steps[i], prev.as_ref(), &StopCriteria::default()).verdict;
    }
    let knee = Knee::of(&steps, &StopCriteria::default());
    (steps, knee)
}

#[test]
fn step_gates_must_hold_in_every_step_and_name_the_failing_ones() {
    let (steps, knee) = judged(vec![
        step(1, 100, 0, 10),
        step(2, 200, 0, 20),
        step(3, 150, 50, 300),
    ]);
    let t = Thresholds::parse(&[
        "p99_ms<250",
        "p99_ms<1000",
        "error_rate<0.1%",
        "anomalies==0",
        "rejected<=50",
        "throughput_rps>=100",
        "max_sustainable>=4",
        "max_sustainable>4",
        "peak_throughput_rps>190",
        "retry_after_max_s<3",
    ])
    .unwrap();
    let r = t.evaluate(&figures(&steps, &knee));
    let holds: Vec<(&str, bool)> = r.iter().map(|g| (g.threshold.as_str(), g.holds)).collect();
    assert_eq!(
        holds,
        [
            ("p99_ms<250", false),
            ("p99_ms<1000", true),
            ("error_rate<0.001", false),
            ("anomalies==0", true),
            ("rejected<=50", true),
            ("throughput_rps>=100", true),
            ("max_sustainable>=4", true),
            ("max_sustainable>4", false),
            ("peak_throughput_rps>190", true),
            ("retry_after_max_s<3", true),
        ]
    );
    assert_eq!(r[0].failing_steps, [3]);
    assert_eq!(r[0].worst, steps[2].p99_ms);
    assert_eq!(
        r[0].detail,
        format!(
            "p99_ms<250 fails in step 3 (worst {} at step 3)",
            steps[2].p99_ms.unwrap()
        )
    );
    assert_eq!(r[2].failing_steps, [3]);
    assert_eq!(r[7].detail, "max_sustainable>4 fails: max_sustainable is 4");
    // What JUnit and the Markdown summary say of a failure: the figure against its limit
    // where it was worst.
    assert_eq!(r[0].worst_step, Some(3));
    assert_eq!(
        r[0].failure.as_deref(),
        Some(format!("p99_ms = {} > 250 in step 3", steps[2].p99_ms.unwrap()).as_str())
    );
    assert_eq!(
        r[2].failure.as_deref(),
        Some("error_rate = 0.25 > 0.001 in step 3")
    );
    assert_eq!(
        r[7].failure.as_deref(),
        Some("max_sustainable = 4, not > 4 in the sweep")
    );
    assert!(r.iter().filter(|g| g.holds).all(|g| g.failure.is_none()));
    assert!(r.iter().all(|g| !g.no_data));
}

#[test]
fn empty_cells_unreached_figures_and_empty_runs_fail() {
    // A step with no response has no latency: a latency gate cannot hold there.
    let (steps, knee) = judged(vec![step(1, 100, 0, 10), step(2, 0, 100, 10)]);
    let r = Threshold::evaluate(&"p50_ms<100".parse().unwrap(), &figures(&steps, &knee));
    assert!(!r.holds);
    assert_eq!(r.failing_steps, [2]);
    assert!(
        r.detail.ends_with("; p50_ms is empty in step 2"),
        "{}",
        r.detail
    );
    assert_eq!(r.failure.as_deref(), Some("p50_ms is empty in step 2"));
    assert!(!r.no_data, "step 1 has a p50");
    // Every step failed: nothing sustainable.
    let (steps, knee) = judged(vec![step(1, 0, 100, 10)]);
    let r = Threshold::evaluate(
        &"max_sustainable>=1".parse().unwrap(),
        &figures(&steps, &knee),
    );
    assert!(!r.holds);
    assert_eq!(
        r.detail,
        "max_sustainable>=1 fails: the sweep reached no max_sustainable"
    );
    let r = Threshold::evaluate(
        &"anomalies==0".parse().unwrap(),
        &figures(&[], &Knee::default()),
    );
    assert!(!r.holds, "no step recorded is no pass");
}

#[test]
fn parse_errors_are_specific() {
    let e = |s: &str| s.parse::<Threshold>().unwrap_err();
    assert_eq!(e(""), GateError::Empty);
    assert!(
        e("p99_ms 250")
            .to_string()
            .contains("no comparison operator")
    );
    assert!(e("anomalies=0").to_string().contains("did you mean '=='"));
    assert!(
        e("latency<3")
            .to_string()
            .contains("unknown metric 'latency'")
    );
    assert!(
        e("p99_ms<abc")
            .to_string()
            .contains("'abc' is not a number")
    );
}

#[test]
fn report_command_exit_codes() {
    let dir = scratch("gates_cli");
    synthetic_run(&dir, &[]);
    let d = dir.to_str().unwrap();

    let ok = mcpload(&[
        "report",
        d,
        "--threshold",
        "p99_ms<1000",
        "--threshold",
        "max_sustainable>=16",
    ]);
    let out = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(out.contains("Knee: saturates at 8 concurrent"), "{out}");
    assert!(out.contains("pass p99_ms<1000"), "{out}");
    assert!(dir.join("report.html").exists());

    let fail = mcpload(&[
        "report",
        d,
        "--threshold",
        "error_rate<0.001",
        "--threshold",
        "p99_ms<1000",
    ]);
    assert_eq!(fail.status.code(), Some(1));
    let err = String::from_utf8_lossy(&fail.stderr);
    assert!(err.contains("threshold failed: error_rate<0.001"), "{err}");
    assert!(
        !err.contains("p99_ms<1000"),
        "only the failing gates are listed: {err}"
    );
    assert!(
        String::from_utf8_lossy(&fail.stdout).contains("FAIL error_rate<0.001 fails in step 6")
    );

    let usage = mcpload(&["report", d, "--threshold", "p99<1"]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("unknown metric 'p99'"));

    let missing = mcpload(&["report", dir.join("nope").to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("summary.json"));
}

/// Gates on one operation (`{op=..}`) read that operation's ops.csv rows, gates on a scenario
/// (`{scenario=..}`, optionally `part=..`) its scenarios.csv rows; one that selects nothing
/// fails, naming what the run has.
#[test]
fn selector_gates_read_the_rows_of_one_operation_or_scenario() {
    let dir = scratch("gates_selectors");
    let done = workflow_run(
        &dir,
        &[
            "p99_ms{op=search}<10",
            "p99_ms{op=write}<10",
            "error_rate{op=write}<0.1%",
            "error_rate{op=search}==0",
            "unknown_id{op=-}==0",
            "anomalies{op=search}==0",
            "p99_ms{op=serach}<10",
            "completed_per_s{scenario=jobs}>0",
            "failed{scenario=jobs}==0",
            "assertion_failures{scenario=jobs,part=wait}<=3",
            "polls_max{scenario=jobs,part=create}<=3",
            "p99_ms{scenario=jobs,part=poll}<1000",
            "p99_ms{scenario=nightly}<1000",
            "error_rate<0.5",
        ],
        |_, _| {},
    );
    let gates: Vec<(&str, bool)> = done
        .summary
        .gates
        .iter()
        .map(|g| (g.threshold.as_str(), g.holds))
        .collect();
    assert_eq!(
        gates,
        [
            ("p99_ms{op=search}<10", true),
            ("p99_ms{op=write}<10", false),
            ("error_rate{op=write}<0.001", false),
            ("error_rate{op=search}==0", true),
            ("unknown_id{op=-}==0", false),
            ("anomalies{op=search}==0", true),
            ("p99_ms{op=serach}<10", false),
            ("completed_per_s{scenario=jobs}>0", true),
            ("failed{scenario=jobs}==0", false),
            ("assertion_failures{scenario=jobs,part=wait}<=3", true),
            // create never polls: its polls columns are empty, and an empty cell fails.
            ("polls_max{scenario=jobs,part=create}<=3", false),
            ("p99_ms{scenario=jobs,part=poll}<1000", false),
            ("p99_ms{scenario=nightly}<1000", false),
            ("error_rate<0.5", true),
        ]
    );
    let detail = |i: usize| done.summary.gates[i].detail.as_str();
    assert_eq!(
        detail(2),
        "error_rate{op=write}<0.001 fails in step 3 (worst 0.125 at step 3)"
    );
    assert_eq!(done.summary.gates[2].failing_steps, [3]);
    assert_eq!(
        detail(4),
        "unknown_id{op=-}==0 fails in steps 1, 2, 3 (worst 3 at step 1)"
    );
    assert_eq!(
        detail(6),
        "p99_ms{op=serach}<10 fails: the run measured no operation 'serach' (operations: \
         search, write, -)"
    );
    assert_eq!(
        detail(8),
        "failed{scenario=jobs}==0 fails in step 3 (worst 3 at step 3)"
    );
    assert!(
        detail(10).ends_with("; polls_max is empty in steps 1, 2, 3"),
        "{}",
        detail(10)
    );
    assert_eq!(
        detail(11),
        "p99_ms{scenario=jobs,part=poll}<1000 fails: scenario 'jobs' has no step 'poll' \
         (its steps: create, wait)"
    );
    assert_eq!(
        detail(12),
        "p99_ms{scenario=nightly}<1000 fails: the run ran no scenario 'nightly' (scenarios: \
         jobs)"
    );

    // `mcpload report` checks the same gates on the folder, exit code and all.
    let d = dir.to_str().unwrap();
    let ok = mcpload(&[
        "report",
        d,
        "--threshold",
        "p99_ms{op=write}<1000",
        "--threshold",
        "error_rate{scenario=jobs}<0.3",
    ]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("pass p99_ms{op=write}<1000"));
    let fail = mcpload(&["report", d, "--threshold", "error_rate{op=write}<0.1"]);
    assert_eq!(fail.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&fail.stderr)
            .contains("threshold failed: error_rate{op=write}<0.1")
    );
    let usage = mcpload(&["report", d, "--threshold", "p99_ms{tool=write}<1"]);
    assert_eq!(usage.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&usage.stderr).contains("unknown label 'tool'"),
        "{}",
        String::from_utf8_lossy(&usage.stderr)
    );
}

/// In a step where an operation sent nothing it has no row: the gate is not failed there,
/// and its detail says so.
#[test]
fn a_step_without_the_operation_is_named_not_failed() {
    let (steps, knee) = judged(vec![step(1, 100, 0, 10), step(2, 100, 0, 10)]);
    let mut stats = Stats::default();
    stats.op_mut(0).counters.requests = 10;
    stats.op_mut(0).counters.ok = 10;
    let ops = mcpload::metrics::OpSummary::rows(&steps[1], &stats, &["search".to_owned()]);
    let run = RunFigures {
        steps: &steps,
        ops: &ops,
        scenarios: &[],
        knee: &knee,
        checks: &[],
    };
    let r = Threshold::evaluate(&"error_rate{op=search}==0".parse().unwrap(), &run);
    assert!(r.holds);
    assert_eq!(
        r.detail,
        "error_rate{op=search}==0 holds in every step (worst 0 at step 2); operation 'search' \
         sent nothing in step 1"
    );
}
