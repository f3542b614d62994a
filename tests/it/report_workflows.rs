//! The run folder broken down by operation and scenario: ops.csv and scenarios.csv written a
//! step at a time with docs/results.md's columns, equal to summary.json's rows, adding up to
//! steps.csv (the `-` row holding what belongs to no request); the terminal and HTML reports
//! of a workflow run; and a folder written before these rows existed, still rendered and
//! compared.

use crate::support::mcpload;
use crate::support::run::first_line;
use crate::support::scratch::scratch;
use crate::support::synthetic::{
    SECONDS_PER_STEP, WORKFLOW_LEVELS, WORKFLOW_OPS, synthetic_run, workflow_run,
};
use mcpload::analysis::Thresholds;
use mcpload::metrics::{NO_OP, WHOLE};
use mcpload::report::{self, RunSummary};
use serde_json::Value;
use std::fs;

/// ops.csv's columns, copied from docs/results.md.
const OPS_HEADER: &str = "step,op,model,concurrency,target_rate,duration_s,requests,responses,
ok,errors,both_result_error,invalid_jsonrpc,duplicate_id,late,unknown_id,null_id,
server_messages,parse_errors,missing,timeouts,http_429,http_503,http_other,transport_errors,
expired_unsent,batches,batch_rejected,response_count_mismatch,throughput_rps,goodput_rps,
error_rate,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,mean_ms,service_p50_ms,service_p90_ms,
service_p99_ms,service_p999_ms,service_max_ms,service_mean_ms,input_unanswered,
version_rejected,tool_errors,output_schema_violations,tool_error,output_schema_violation";

/// scenarios.csv's columns, copied from docs/results.md.
const SCENARIOS_HEADER: &str = "step,scenario,part,model,concurrency,target_rate,duration_s,
started,completed,failed,interrupted,completed_per_s,error_rate,p50_ms,p90_ms,p99_ms,p999_ms,
max_ms,mean_ms,polls_p50,polls_p99,polls_max,polls_mean,assertion_failures,failure_reasons";

/// Within HDR's 3 significant digits of `want`.
fn near(v: Option<f64>, want: f64) -> bool {
    v.is_some_and(|v| (v - want).abs() <= want * 0.002)
}

#[test]
fn ops_and_scenarios_csv_are_written_per_step_and_add_up_to_steps_csv() {
    let dir = scratch("workflow_csvs");
    let mut seen = Vec::new();
    let done = workflow_run(&dir, &[], |run, step| {
        // What a crash right after this step would leave: its rows, flushed.
        let ops = report::read_ops(run.dir()).unwrap();
        let scenarios = report::read_scenarios(run.dir()).unwrap();
        assert_eq!(ops.last(), step.ops.last());
        assert_eq!(scenarios.last(), step.scenarios.last());
        seen.push((ops.len(), scenarios.len()));
    });
    // Per step: search, write and '-'; the '*' row of jobs, then create and wait.
    assert_eq!(seen, [(3, 3), (6, 6), (9, 9)]);
    let compact = |s: &str| s.split_whitespace().collect::<String>();
    assert_eq!(first_line(&dir.join("ops.csv")), compact(OPS_HEADER));
    assert_eq!(
        first_line(&dir.join("scenarios.csv")),
        compact(SCENARIOS_HEADER)
    );

    let summary = RunSummary::read(&dir).unwrap();
    assert_eq!(summary, done.summary);
    let ops = report::read_ops(&dir).unwrap();
    let scenarios = report::read_scenarios(&dir).unwrap();
    assert_eq!(ops, summary.op_rows());
    assert_eq!(scenarios, summary.scenario_rows());

    let steps = report::read_steps(&dir).unwrap();
    assert_eq!(steps.len(), WORKFLOW_LEVELS.len());
    let secs = u64::from(SECONDS_PER_STEP);
    for (s, n) in steps.iter().zip(WORKFLOW_LEVELS) {
        let rows: Vec<_> = ops.iter().filter(|o| o.step == s.step).collect();
        let names: Vec<&str> = rows.iter().map(|o| o.op.as_str()).collect();
        assert_eq!(names, [WORKFLOW_OPS[0], WORKFLOW_OPS[1], NO_OP]);
        type Get = fn(&mcpload::metrics::OpSummary) -> u64;
        let columns: [(&str, Get, u64); 6] = [
            ("requests", |o| o.requests, s.requests),
            ("responses", |o| o.responses, s.responses),
            ("ok", |o| o.ok, s.ok),
            ("errors", |o| o.errors, s.errors),
            ("unknown_id", |o| o.unknown_id, s.unknown_id),
            ("server_messages", |o| o.server_messages, s.server_messages),
        ];
        for (name, get, total) in columns {
            let sum: u64 = rows.iter().map(|o| get(o)).sum();
            assert_eq!(sum, total, "step {} {name}", s.step);
        }
        assert_eq!(rows[0].requests, 10 * n * secs);
        assert_eq!(rows[1].requests, 2 * n * secs);
        assert!(near(rows[0].p50_ms, 5.0), "{:?}", rows[0]);
        assert!(near(rows[1].p99_ms, 20.0), "{:?}", rows[1]);
        // What belongs to no request, and nothing else, is in the '-' row.
        let rest = rows[2];
        assert_eq!((rest.requests, rest.ok, rest.p50_ms), (0, 0, None));
        assert_eq!((rest.unknown_id, rest.server_messages), (secs, 2 * secs));
        assert_eq!(rows[0].unknown_id + rows[1].unknown_id, 0);
        // Each row carries its step's load and length.
        assert!(rows.iter().all(|o| o.concurrency == Some(n)
            && o.duration_s == s.duration_s
            && o.model == s.model));
    }

    let last: Vec<_> = scenarios.iter().filter(|r| r.step == 3).collect();
    let parts: Vec<&str> = last.iter().map(|r| r.part.as_str()).collect();
    assert_eq!(parts, [WHOLE, "create", "wait"]);
    let whole = last[0];
    assert_eq!(
        (
            whole.scenario.as_str(),
            whole.started,
            whole.completed,
            whole.failed
        ),
        ("jobs", 4 * secs, 3 * secs, secs)
    );
    assert_eq!(whole.error_rate, 0.25);
    assert_eq!(whole.assertion_failures, secs);
    assert_eq!(
        whole.failure_reasons.to_string(),
        format!("expect status == \"done\" ({secs})")
    );
    assert_eq!((whole.polls_mean, whole.polls_max), (Some(3.0), Some(3)));
    assert!(near(whole.p99_ms, 100.0), "{whole:?}");
    assert_eq!(whole.completed_per_s, (3 * secs) as f64 / whole.duration_s);
    assert_eq!((last[1].polls_mean, last[1].failed), (None, 0));
    assert_eq!((last[2].failed, last[2].completed), (secs, 3 * secs));
    // The scenario rows of the first step: nothing failed, no reason.
    let first = scenarios.iter().find(|r| r.step == 1).unwrap();
    assert_eq!(
        (first.failed, first.failure_reasons.to_string().as_str()),
        (0, "")
    );

    // summary.json holds the same rows under each step, as the CSVs name them.
    let json: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let step3 = &json["steps"][2];
    assert_eq!(step3["ops"][2]["op"], NO_OP);
    assert_eq!(step3["ops"][1]["error_rate"], 0.125);
    assert_eq!(step3["scenarios"][0]["part"], WHOLE);
    assert_eq!(step3["scenarios"][2]["part"], "wait");
}

#[test]
fn a_workflow_run_is_broken_down_in_the_terminal_and_the_html() {
    let dir = scratch("workflow_reports");
    let done = workflow_run(&dir, &[], |_, _| {});
    let t = &done.terminal;
    assert!(t.contains("By operation:"), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    let op_lines = |name: &str| {
        lines
            .iter()
            .filter(|l| l.split_whitespace().next() == Some(name))
            .count()
    };
    assert_eq!(op_lines("search"), 3, "{t}");
    assert_eq!(op_lines("write"), 3, "{t}");
    // The '-' row counts an unknown_id in every step, so every step shows it.
    assert_eq!(op_lines("-"), 3, "{t}");
    assert!(t.contains("3 (12.5%)"), "write's errors at 4 clients: {t}");
    assert!(t.contains("By scenario (whole iterations):"), "{t}");
    assert_eq!(op_lines("jobs"), 4, "three steps and the failure line: {t}");
    assert!(
        t.contains("jobs failed: expect status == \"done\" × 3"),
        "{t}"
    );

    let html = fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 8);
    assert!(html.contains("By operation") && html.contains("By scenario"));
    let latency = fs::read_to_string(dir.join("ops-latency.svg")).unwrap();
    assert!(latency.contains("search p99") && latency.contains("write p50"));
    let errors = fs::read_to_string(dir.join("error-rates.svg")).unwrap();
    assert!(errors.contains("scenario jobs") && errors.contains("\nwrite\n"));
    let its = fs::read_to_string(dir.join("scenarios.svg")).unwrap();
    assert!(its.contains("jobs: iterations/s") && its.contains("jobs: p99 ms"));

    // One operation and no scenario: the report reads as it always did.
    let single = scratch("workflow_reports_single");
    let plain = synthetic_run(&single, &[]);
    assert!(!plain.terminal.contains("By operation"));
    assert!(!single.join("ops-latency.svg").exists());
    let rows = report::read_ops(&single).unwrap();
    assert!(rows.iter().all(|o| o.op == NO_OP), "no named operation");
    assert_eq!(report::read_scenarios(&single).unwrap(), []);
}

/// A folder written before ops and scenarios rows existed (summary.json without them, no
/// ops.csv or scenarios.csv) still renders, gates say why an operation gate cannot hold, and
/// it compares with a new folder.
#[test]
fn a_folder_without_ops_or_scenarios_still_rerenders_and_compares() {
    let dir = scratch("workflow_old");
    workflow_run(&dir, &[], |_, _| {});
    let new = scratch("workflow_new");
    workflow_run(&new, &[], |_, _| {});
    let path = dir.join("summary.json");
    let mut v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    v["schema_version"] = 1.into();
    for step in v["steps"].as_array_mut().unwrap() {
        let step = step.as_object_mut().unwrap();
        assert!(step.remove("ops").is_some());
        assert!(step.remove("scenarios").is_some());
        assert!(step.remove("expired_unsent").is_some());
    }
    fs::write(&path, v.to_string()).unwrap();
    fs::remove_file(dir.join("ops.csv")).unwrap();
    fs::remove_file(dir.join("scenarios.csv")).unwrap();

    let thresholds = Thresholds::parse(&["p99_ms{op=search}<1000", "p99_ms<1000"]).unwrap();
    let done = report::rerender(&dir, &thresholds, false).unwrap();
    assert!(done.summary.steps.iter().all(|s| s.ops.is_empty()));
    assert!(!done.terminal.contains("By operation"), "{}", done.terminal);
    let gates: Vec<(bool, &str)> = done
        .summary
        .gates
        .iter()
        .map(|g| (g.holds, g.detail.as_str()))
        .collect();
    assert_eq!(
        gates[0],
        (
            false,
            "p99_ms{op=search}<1000 fails: the run recorded no per-operation figures"
        )
    );
    assert!(gates[1].0, "{gates:?}");
    assert_eq!(
        fs::read_to_string(dir.join("report.html"))
            .unwrap()
            .matches("<svg")
            .count(),
        5
    );

    let out = mcpload(&["compare", dir.to_str().unwrap(), new.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("pass: no regression"), "{text}");
}
