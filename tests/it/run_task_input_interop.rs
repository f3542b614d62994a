//! A 2025-11-25 task that asks for input, against a real server: the TypeScript "everything"
//! server's `simulate-research-query` with `ambiguous: true` runs four one-second stages and,
//! before the third, turns `input_required` and sends one `elicitation/create` about its
//! task on the `tasks/result` stream. mcpload answers it from the profile's `[input]` (one
//! round a call), or, with no elicitation answer, counts it `input_unanswered` and cancels
//! the task. Over Streamable HTTP and stdio.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{everything_cmd, line, start_http};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

type Row = HashMap<String, String>;

/// The calls of one step: each longer than the step, so exactly `clients` of them.
const CLIENTS: u64 = 3;

/// Runs a step of `CLIENTS` research queries against `target` (a `[target]` line) with
/// `input` (the profile's `[input]` table); returns steps.csv's row, ops.csv's rows by
/// operation and summary.json's step.
fn research(dir: &Path, target: &str, input: &str) -> (Row, HashMap<String, Row>, Value) {
    let text = format!(
        r#"[target]
{target}
protocol = "2025-11-25"
[load]
graceful_stop = "40s"
[[mix]]
method = "tools/call"
tool = "simulate-research-query"
args = {{ topic = "python {{{{seq}}}}", ambiguous = true }}
task = true
task_timeout = "40s"
[input]
{input}
"#
    );
    let p = profile(dir, "research", &text);
    let out_dir = dir.join("run");
    let clients = CLIENTS.to_string();
    let out = run(&[
        p.to_str().unwrap(),
        "-c",
        &clients,
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--timeout",
        "30s",
        // One session, so one roots/list of the server's own.
        "--workers",
        "1",
        "--keep-going",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 1);
    assert_identity(&rows[0]);
    let ops = table(&out_dir, "ops.csv")
        .into_iter()
        .map(|r| (r["op"].clone(), r))
        .collect();
    let step = summary(&out_dir)["steps"][0].clone();
    (rows[0].clone(), ops, step)
}

fn n(row: &Row, col: &str) -> u64 {
    num(row, col) as u64
}

/// Every call answered its one elicitation from the canned input and got its result; the
/// call's latency covers the four stages the server sleeps through.
fn assert_answered(step: &Row, ops: &HashMap<String, Row>, flows: &Value, extra_rounds: u64) {
    assert_eq!(n(step, "calls"), CLIENTS, "{step:?}");
    for col in ["calls_answered", "tasks_created", "tasks_completed"] {
        assert_eq!(n(step, col), CLIENTS, "{col}: {step:?}");
    }
    assert_eq!(flows["calls_ok"], CLIENTS);
    assert_eq!(flows["rounds_per_call_p50"], 1, "{flows}");
    assert_eq!(flows["rounds_per_call_max"], 1, "{flows}");
    let rounds = n(step, "input_rounds");
    assert!(
        (CLIENTS..=CLIENTS + extra_rounds).contains(&rounds),
        "{rounds} rounds: {flows}"
    );
    for col in [
        "input_unanswered",
        "input_refused",
        "input_rounds_exceeded",
        "task_anomalies",
        "tasks_unfinished",
    ] {
        assert_eq!(n(step, col), 0, "{col}: {step:?}");
    }
    // One tasks/result each, asked for when the task turned input_required.
    assert_eq!(n(&ops["tasks/result"], "ok"), CLIENTS);
    assert!(!ops.contains_key("tasks/cancel"));
    let latency = num(&ops["simulate-research-query"], "p50_ms");
    assert!(latency >= 4000.0, "4 stages of 1 s, got {latency} ms");
}

#[test]
fn a_task_asking_for_input_over_http_is_answered_from_the_canned_input() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    let dir = scratch("task-input-http");
    let input = r#"elicitation = { action = "accept", content = { interpretation = "snake" } }
roots = ["file:///tmp"]"#;
    let (step, ops, record) = research(&dir, &format!("url = '{}'", server.url), input);
    // Over HTTP the server's roots/list, 350 ms after the session starts, comes on the
    // session's GET stream (mcpload opens it before the load, as it declares roots): answered
    // from the canned roots, a round of no call.
    assert_answered(&step, &ops, &record["flows"], 1);
}

#[test]
fn a_task_asking_for_input_over_stdio_is_answered_from_the_canned_input() {
    let _share = machine::loading();
    let dir = scratch("task-input-stdio");
    let input = r#"elicitation = { action = "accept", content = { interpretation = "snake" } }
roots = ["file:///tmp"]"#;
    let command = serde_json::to_string(&line(&everything_cmd("stdio"))).unwrap();
    let target = format!("stdio = {command}");
    let (step, ops, record) = research(&dir, &target, input);
    // Over stdio the server's roots/list, 350 ms after the session starts, may come during
    // the load: answered from the canned roots, a round of no call.
    assert_answered(&step, &ops, &record["flows"], 1);
}

#[test]
fn a_task_asking_for_input_the_profile_cannot_give_is_counted_and_cancelled() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    let dir = scratch("task-input-unanswered");
    let (step, ops, record) = research(
        &dir,
        &format!("url = '{}'", server.url),
        r#"sampling = "no elicitation here""#,
    );
    assert_eq!(n(&step, "calls"), CLIENTS);
    assert_eq!(n(&step, "calls_failed"), CLIENTS, "{step:?}");
    assert_eq!(n(&step, "tasks_created"), CLIENTS);
    // Refused too: the server's own roots/list on the session's GET stream, unless the
    // server sent it before the stream was open (it drops what finds no stream: 350 ms after
    // the session starts, a time a loaded machine can miss).
    let refused = &record["input_refused_by_kind"];
    assert_eq!(refused["elicitation"], CLIENTS, "{refused}");
    let roots = refused["roots"].as_u64().unwrap_or(0);
    assert!(roots <= 1, "one session, one roots/list: {refused}");
    assert_eq!(n(&step, "input_refused"), CLIENTS + roots);
    assert_eq!(n(&step, "input_rounds"), 0);
    assert_eq!(n(&step, "tasks_completed"), 0);
    assert_eq!(n(&ops["tasks/cancel"], "requests"), CLIENTS);
}
