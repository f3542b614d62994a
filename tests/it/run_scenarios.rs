//! Scenarios and per-operation results against the built-in target's ground truth: the job
//! API's counts in its final /stats (target-stats.json), captures and their named failures,
//! a parallel step's join, iterations of an open loop over a stall, and per-operation rows
//! that equal the target's per-operation counts with faults on.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

type Row = HashMap<String, String>;

/// Runs `profile_text` as `<name>.toml` and returns the run folder (the run must succeed).
fn run_profile(name: &str, profile_text: &str) -> PathBuf {
    let dir = scratch(name);
    let p = profile(&dir, name, profile_text);
    let out_dir = dir.join("run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{name}");
    out_dir
}

fn target_stats(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("target-stats.json")).unwrap()).unwrap()
}

fn stat(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no {pointer} in target-stats.json"))
}

/// scenarios.csv's row of `scenario` / `part` in step 1.
fn scenario_row(dir: &Path, scenario: &str, part: &str) -> Row {
    table(dir, "scenarios.csv")
        .into_iter()
        .find(|r| r["step"] == "1" && r["scenario"] == scenario && r["part"] == part)
        .unwrap_or_else(|| panic!("no scenarios.csv row {scenario} / {part}"))
}

/// ops.csv's row of `op` in step 1.
fn op_row(dir: &Path, op: &str) -> Row {
    table(dir, "ops.csv")
        .into_iter()
        .find(|r| r["step"] == "1" && r["op"] == op)
        .unwrap_or_else(|| panic!("no ops.csv row {op}"))
}

/// A closed loop of `users` for 2 s over the built-in target with `builtin` knobs.
fn jobs_profile(builtin: &str, users: u32, scenario: &str) -> String {
    format!(
        r#"
[target.builtin]
{builtin}

[load]
concurrency = [{users}]
duration = "2s"
warmup = "0s"
timeout = "5s"
graceful_stop = "10s"

{scenario}
"#
    )
}

/// Start a job of `items` (TOML: `10`, or a template such as `"{{rand:5..14}}"`), poll it to a
/// terminal state at the target's interval, read its report, check the counts.
fn job_scenario(items: &str) -> String {
    JOB_SCENARIO.replace("ITEMS", items)
}

const JOB_SCENARIO: &str = r#"
[[scenario]]
name = "job"

  [[scenario.step]]
  name = "start"
  call = { method = "tools/call", tool = "job_start", args = { items = ITEMS, request_key = "{{uuid}}" } }
  capture = { job_id = "result.structuredContent.job_id" }

  [[scenario.step]]
  name = "wait"
  poll = { method = "tools/call", tool = "job_status", args = { job_id = "{{var.job_id}}" } }
  until = "result.structuredContent.state in ['succeeded', 'partial', 'failed']"
  interval = "1s"
  server_interval = true
  max_polls = 1000
  max_time = "30s"

  [[scenario.step]]
  name = "report"
  call = { method = "tools/call", tool = "job_report", args = { job_id = "{{var.job_id}}" } }
  capture = { succeeded = "result.structuredContent.succeeded", failed = "result.structuredContent.failed", total = "result.structuredContent.total" }

  [[scenario.step]]
  name = "check"
  expect = ["var.succeeded + var.failed == var.total"]
"#;

/// Every iteration of a jobs scenario is one job on the target: iterations completed equal
/// jobs created, polls equal the target's status calls, and polls per iteration follow the
/// job's length over the advertised poll interval.
#[test]
fn a_jobs_scenario_matches_the_targets_job_counts() {
    let _share = machine::loading();
    let dir = run_profile(
        "scenario-jobs",
        &jobs_profile(
            "job_item_ms = 20\njob_poll_interval_ms = 50\njob_fail_every = 4",
            4,
            &job_scenario("10"),
        ),
    );
    let stats = target_stats(&dir);
    let whole = scenario_row(&dir, "job", "*");
    let started = num(&whole, "started");
    assert!(started > 0.0);
    assert_eq!(num(&whole, "failed"), 0.0, "{whole:?}");
    assert_eq!(num(&whole, "interrupted"), 0.0, "{whole:?}");
    assert_eq!(num(&whole, "completed"), started);
    assert_eq!(num(&whole, "completed"), stat(&stats, "/jobs/created"));
    assert_eq!(num(&whole, "completed"), stat(&stats, "/jobs/reports_read"));
    assert_eq!(stat(&stats, "/jobs/replays"), 0.0);
    // Every poll is one job_status call the target answered with a status.
    let polls = op_row(&dir, "job/wait");
    assert_eq!(num(&polls, "ok"), stat(&stats, "/jobs/polls"));
    assert_eq!(num(&polls, "requests"), stat(&stats, "/jobs/polls"));
    // A job of 10 items of 20 ms polled every 50 ms: 200 / 50 = 4 intervals, so 4 polls
    // within one (the first comes at once, the fifth at 200 ms sees it done; polls that
    // answer late stretch the intervals, so fewer, never more).
    let polls = num(&whole, "polls_mean");
    assert!((3.0..=5.0).contains(&polls), "polls per iteration {polls}");
    assert!(num(&whole, "polls_max") <= 5.0, "{whole:?}");
    let wait = scenario_row(&dir, "job", "wait");
    assert_eq!(num(&wait, "completed"), started);
    // Time to the terminal state is at least the job's 200 ms.
    assert!(num(&wait, "p50_ms") >= 200.0, "{wait:?}");
    // steps.csv carries the iteration figures the verdict judged.
    let step = &steps(&dir)[0];
    assert_eq!(num(step, "iterations_completed"), started);
    assert_eq!(num(step, "iteration_error_rate"), 0.0);
    assert_identity(step);
}

/// A target that leaves every 10th item out of its reports: jobs of 10 or more items fail
/// the expect step, and exactly those.
#[test]
fn an_expect_step_counts_every_lossy_report() {
    let _share = machine::loading();
    let dir = run_profile(
        "scenario-lossy",
        &jobs_profile(
            "job_item_ms = 5\njob_poll_interval_ms = 20\njob_lose_every = 10",
            4,
            &job_scenario("\"{{rand:5..14}}\""),
        ),
    );
    let stats = target_stats(&dir);
    let lossy = stat(&stats, "/jobs/reports_lossy");
    let whole = scenario_row(&dir, "job", "*");
    // Items are drawn in 5..=14: about half the jobs lose one.
    assert!(
        lossy > 0.0 && lossy < stat(&stats, "/jobs/created"),
        "{lossy}"
    );
    assert_eq!(num(&whole, "assertion_failures"), lossy);
    assert_eq!(num(&whole, "failed"), lossy);
    assert_eq!(
        num(&whole, "completed"),
        stat(&stats, "/jobs/reports_read") - lossy
    );
    assert_eq!(
        whole["failure_reasons"],
        format!("expect check: var.succeeded + var.failed == var.total ({lossy})")
    );
    let check = scenario_row(&dir, "job", "check");
    assert_eq!(num(&check, "failed"), lossy);
}

/// Captures: from an error answer (reading `error`), into an array, and two that find
/// nothing, each failure counted under its named reason.
#[test]
fn captures_fail_with_named_reasons() {
    let _share = machine::loading();
    let scenarios = r#"
[[scenario]]
name = "from-error"
  [[scenario.step]]
  name = "fail"
  call = { method = "tools/call", tool = "fail", args = { code = -32042 } }
  capture = { code = "error.code" }
  [[scenario.step]]
  name = "check"
  expect = ["var.code == -32042"]

[[scenario]]
name = "error-not-result"
  [[scenario.step]]
  name = "fail"
  call = { method = "tools/call", tool = "fail", args = { code = -32042 } }
  capture = { text = "result.content[0].text" }

[[scenario]]
name = "array"
  [[scenario.step]]
  name = "echo"
  call = { method = "tools/call", tool = "echo", args = { message = "in the array" } }
  capture = { text = "result.content[0].text" }
  [[scenario.step]]
  name = "check"
  expect = ["var.text == 'in the array'"]

[[scenario]]
name = "params"
  [[scenario.step]]
  name = "progress"
  call = { method = "tools/call", params = { name = "progress", arguments = { steps = 2, ms = 1 }, _meta = { progressToken = "{{uuid}}" } } }
  capture = { text = "result.content[0].text" }

[[scenario]]
name = "poll-error"
  [[scenario.step]]
  name = "wait"
  poll = { method = "tools/call", tool = "fail", args = { code = -32042 } }
  until = "result.structuredContent.state == 'done'"
  interval = "10ms"
  max_polls = 3

[[scenario]]
name = "missing"
  [[scenario.step]]
  name = "echo"
  call = { method = "tools/call", tool = "echo" }
  capture = { second = "result.content[1].text" }
"#;
    let dir = run_profile("scenario-captures", &jobs_profile("", 4, scenarios));
    let stats = target_stats(&dir);
    for ok in ["from-error", "array", "params"] {
        let r = scenario_row(&dir, ok, "*");
        assert!(num(&r, "completed") > 0.0, "{ok}: {r:?}");
        assert_eq!(num(&r, "failed"), 0.0, "{ok}: {r:?}");
    }
    let e = scenario_row(&dir, "error-not-result", "*");
    let n = num(&e, "failed");
    assert!(n > 0.0 && num(&e, "completed") == 0.0, "{e:?}");
    assert_eq!(
        e["failure_reasons"],
        format!("fail: capture text: the answer is an error (-32042) ({n})")
    );
    let p = scenario_row(&dir, "poll-error", "*");
    let n = num(&p, "failed");
    assert!(n > 0.0 && num(&p, "completed") == 0.0, "{p:?}");
    assert_eq!(
        p["failure_reasons"],
        format!("wait: error answer (-32042) ({n})")
    );
    let m = scenario_row(&dir, "missing", "*");
    let n = num(&m, "failed");
    assert!(n > 0.0 && num(&m, "completed") == 0.0, "{m:?}");
    assert_eq!(
        m["failure_reasons"],
        format!("echo: capture second: result.content[1].text not found ({n})")
    );
    // The target answered every fail call with an error and every echo with a result:
    // the rows of the calls say the same.
    let fails = num(&op_row(&dir, "from-error/fail"), "errors")
        + num(&op_row(&dir, "error-not-result/fail"), "errors")
        + num(&op_row(&dir, "poll-error/wait"), "errors");
    assert_eq!(fails, stat(&stats, "/operations/fail/answered_error"));
    let echoes = num(&op_row(&dir, "array/echo"), "ok") + num(&op_row(&dir, "missing/echo"), "ok");
    assert_eq!(echoes, stat(&stats, "/operations/echo/answered_ok"));
}

/// A parallel step whose slow member sleeps 400 ms: the join waits for it, the fast member's
/// own row does not.
#[test]
fn a_parallel_step_joins_on_its_slowest_member() {
    let _share = machine::loading();
    let scenario = r#"
[[scenario]]
name = "fan"
  [[scenario.step]]
  name = "both"
  parallel = [
    { name = "slow", method = "tools/call", tool = "sleep", args = { ms = 400 } },
    { name = "fast", method = "resources/read", uri = "mem://item/2", capture = { text = "result.contents[0].text" } },
  ]
  [[scenario.step]]
  name = "check"
  expect = ["var.text == 'item 2'"]
"#;
    let dir = run_profile("scenario-parallel", &jobs_profile("", 2, scenario));
    let join = scenario_row(&dir, "fan", "both");
    assert!(num(&join, "completed") > 0.0);
    assert_eq!(num(&join, "failed"), 0.0, "{join:?}");
    assert!(num(&join, "p50_ms") >= 400.0, "join {join:?}");
    let slow = op_row(&dir, "fan/both/slow");
    let fast = op_row(&dir, "fan/both/fast");
    assert!(num(&slow, "p50_ms") >= 400.0);
    assert!(num(&fast, "p50_ms") < num(&join, "p50_ms"), "{fast:?}");
    assert_eq!(num(&fast, "ok"), num(&join, "completed"));
    let whole = scenario_row(&dir, "fan", "*");
    assert_eq!(num(&whole, "failed"), 0.0);
    assert!(num(&whole, "p50_ms") >= 400.0);
}

/// An open loop starts iterations on schedule whatever the target does, so a 1 s stall
/// shows in the iterations' p99 (their latency runs from the scheduled start).
#[test]
fn an_open_loop_of_iterations_sees_a_stall() {
    let _share = machine::measuring();
    let text = r#"
[target.builtin]
stall = ["1500ms:1s"]

[load]
rate = [40]
duration = "4s"
warmup = "0s"
timeout = "3s"

[[scenario]]
name = "two"
  [[scenario.step]]
  name = "first"
  call = { method = "tools/call", tool = "echo" }
  [[scenario.step]]
  name = "second"
  call = { method = "tools/call", tool = "echo" }
"#;
    let dir = run_profile("scenario-open-stall", text);
    let whole = scenario_row(&dir, "two", "*");
    assert!(num(&whole, "completed") > 100.0, "{whole:?}");
    // About a quarter of the iterations start in the stall and wait up to 1 s.
    assert!(num(&whole, "p99_ms") >= 300.0, "{whole:?}");
    let step = &steps(&dir)[0];
    assert!(num(step, "iteration_p99_ms") >= 300.0);
}

/// Every operation's row equals what the target counted for it, with every fault on, and
/// what no operation holds is only what belongs to no request.
#[test]
fn operation_rows_equal_the_targets_per_operation_counts_with_faults() {
    let _share = machine::loading();
    let text = r#"
[target.builtin]
fault = "drop=7,null-id=11,unknown-id=13,duplicate=17,both=19,bad-version=23,garbage=29,truncate=31"

[load]
concurrency = [8]
duration = "2s"
warmup = "0s"
timeout = "2s"
stop_on_failure = false

[[mix]]
method = "tools/call"
tool = "echo"
weight = 3

[[mix]]
method = "tools/call"
tool = "sleep"
args = { ms = 1 }

[[mix]]
method = "resources/read"
uri = "mem://item/{{rand:1..3}}"
name = "item"
"#;
    let dir = run_profile("ops-faults", text);
    let stats = target_stats(&dir);
    let step = &steps(&dir)[0];
    let rows: Vec<Row> = table(&dir, "ops.csv")
        .into_iter()
        .filter(|r| r["step"] == "1")
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r["op"].as_str()).collect();
    assert_eq!(names, ["echo", "sleep", "item", "-"]);
    for col in [
        "requests",
        "responses",
        "ok",
        "errors",
        "both_result_error",
        "invalid_jsonrpc",
        "duplicate_id",
        "late",
        "unknown_id",
        "null_id",
        "server_messages",
        "parse_errors",
        "missing",
        "timeouts",
        "http_other",
        "transport_errors",
    ] {
        let sum: f64 = rows.iter().map(|r| num(r, col)).sum();
        assert_eq!(sum, num(step, col), "{col}: the rows add up to the step");
    }
    // The faults landed on the operations' own rows.
    for col in [
        "missing",
        "duplicate_id",
        "both_result_error",
        "invalid_jsonrpc",
    ] {
        let on_ops: f64 = rows[..3].iter().map(|r| num(r, col)).sum();
        assert!(on_ops > 0.0, "no {col} on any operation");
    }
    let rest = &rows[3];
    for col in [
        "requests",
        "ok",
        "errors",
        "missing",
        "duplicate_id",
        "timeouts",
    ] {
        assert_eq!(num(rest, col), 0.0, "{col} belongs to a request");
    }
    assert!(num(rest, "null_id") + num(rest, "parse_errors") > 0.0);
    // The target names a resource read by its uri: the three uris are one row here.
    for (row, keys) in [
        (&rows[0], vec!["echo"]),
        (&rows[1], vec!["sleep"]),
        (
            &rows[2],
            vec!["mem://item/1", "mem://item/2", "mem://item/3"],
        ),
    ] {
        let truth = |col: &str| -> f64 {
            keys.iter()
                .map(|k| {
                    stats
                        .pointer(&format!(
                            "/operations/{}/client_view/{col}",
                            k.replace('/', "~1")
                        ))
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0)
                })
                .sum()
        };
        for col in [
            "ok",
            "errors",
            "both_result_error",
            "invalid_jsonrpc",
            "duplicate_id",
            "missing",
        ] {
            assert_eq!(num(row, col), truth(col), "{}: {col}", row["op"]);
        }
        assert!(num(row, "requests") > 0.0);
        assert_eq!(
            num(row, "requests"),
            num(row, "responses")
                + num(row, "missing")
                + num(row, "timeouts")
                + num(row, "http_other")
                + num(row, "transport_errors")
        );
    }
}

/// Iterations still running when the sending ends get `graceful_stop` to finish, then count
/// as interrupted; a CSV row is bound to a whole iteration.
#[test]
fn a_graceful_stop_interrupts_what_is_left_and_csv_rows_hold_for_an_iteration() {
    let _share = machine::loading();
    let dir = scratch("scenario-graceful");
    let rows: String = (0..50).map(|i| format!("row-{i}\n")).collect();
    std::fs::write(dir.join("rows.csv"), format!("msg\n{rows}")).unwrap();
    let text = r#"
[target.builtin]

[load]
concurrency = [8]
duration = "1s"
warmup = "0s"
timeout = "5s"
graceful_stop = "300ms"

[[scenario]]
name = "rows"
weight = 20
csv = "rows.csv"
  [[scenario.step]]
  name = "a"
  call = { method = "tools/call", tool = "echo", args = { message = "{{csv:msg}}" } }
  capture = { a = "result.content[0].text" }
  [[scenario.step]]
  name = "b"
  call = { method = "tools/call", tool = "echo", args = { message = "{{csv:msg}}" } }
  capture = { b = "result.content[0].text" }
  [[scenario.step]]
  name = "same"
  expect = ["var.a == var.b"]

[[scenario]]
name = "long"
  [[scenario.step]]
  name = "echo"
  call = { method = "tools/call", tool = "echo" }
  [[scenario.step]]
  think = "30s"
"#;
    let p = profile(&dir, "graceful", text);
    let out_dir = dir.join("run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let rows = scenario_row(&out_dir, "rows", "*");
    assert!(num(&rows, "completed") > 0.0);
    assert_eq!(num(&rows, "failed"), 0.0, "{rows:?}");
    // A user that drew `long` (1 draw in 21; each user draws hundreds of times a second
    // until it does) thinks for 30 s: it is still thinking when the step's sending ends,
    // and 300 ms later it is interrupted; it never completes.
    let long = scenario_row(&out_dir, "long", "*");
    assert!(num(&long, "started") > 0.0, "{long:?}");
    assert_eq!(num(&long, "completed"), 0.0);
    assert_eq!(num(&long, "failed"), 0.0);
    assert_eq!(num(&long, "interrupted"), num(&long, "started"));
    let think = scenario_row(&out_dir, "long", "2-think");
    assert_eq!(num(&think, "interrupted"), num(&long, "started"));
    let step = &steps(&out_dir)[0];
    assert_eq!(
        num(step, "iterations_interrupted"),
        num(&long, "interrupted") + num(&rows, "interrupted")
    );
    // The step ended well before the 30 s think would have.
    assert!(num(step, "duration_s") < 10.0, "{step:?}");
}

/// A tool error fails its step as an error answer does, and the iteration with it; with
/// `criteria.tool_errors = "ok"` the same calls count `ok` and the iterations go on.
#[test]
fn a_tool_error_fails_its_step_unless_tool_errors_count_ok() {
    let _share = machine::loading();
    let scenario = r#"
[[scenario]]
name = "broken"
  [[scenario.step]]
  name = "boom"
  call = { method = "tools/call", tool = "tool_error", args = { message = "downstream down" } }
  [[scenario.step]]
  name = "after"
  call = { method = "tools/call", tool = "echo" }
"#;
    for counted_ok in [false, true] {
        let mut text = jobs_profile("", 2, scenario);
        if counted_ok {
            text.push_str("\n[criteria]\ntool_errors = \"ok\"\n");
        }
        let dir = run_profile(&format!("scenario-tool-error-{counted_ok}"), &text);
        let whole = scenario_row(&dir, "broken", "*");
        let boom = op_row(&dir, "broken/boom");
        let step = &steps(&dir)[0];
        assert_identity(step);
        let calls = num(&boom, "requests");
        assert!(calls > 0.0, "{boom:?}");
        if counted_ok {
            assert_eq!(num(&whole, "failed"), 0.0, "{whole:?}");
            assert_eq!(num(&boom, "ok"), calls);
            assert_eq!(num(&boom, "tool_errors"), 0.0);
        } else {
            assert_eq!(num(&whole, "failed"), calls, "{whole:?}");
            assert_eq!(num(&whole, "completed"), 0.0, "{whole:?}");
            assert_eq!(
                whole["failure_reasons"],
                format!("boom: tool error (isError: true) ({calls})")
            );
            assert_eq!(num(&boom, "tool_errors"), calls);
            assert_eq!(boom["tool_error"], "downstream down");
            assert_eq!(step["tool_error"], "downstream down");
        }
    }
}

/// A scenario step's result is read by its tool's rules too: the built-in target breaks
/// every 5th `structuredContent` against echo's `outputSchema`, and the scenario step's row
/// counts exactly what the target broke, each failing its iteration.
#[test]
fn a_scenario_steps_results_are_checked_against_the_tools_output_schema() {
    let _share = machine::loading();
    let text = r#"
[target.builtin]
fault = "bad-structured=5"

[load]
concurrency = [4]
duration = "1s"
warmup = "0s"
stop_on_failure = false

[[scenario]]
name = "say"
  [[scenario.step]]
  name = "echo"
  call = { method = "tools/call", tool = "echo", args = { message = "hi {{seq}}" } }
"#;
    let dir = run_profile("scenario-output-schema", text);
    let broken = stat(&target_stats(&dir), "/faults/bad_structured");
    assert!(broken > 0.0, "the target broke nothing");
    let op = op_row(&dir, "say/echo");
    assert_eq!(num(&op, "output_schema_violations"), broken, "{op:?}");
    assert!(!op["output_schema_violation"].is_empty(), "{op:?}");
    let whole = scenario_row(&dir, "say", "*");
    assert_eq!(num(&whole, "failed"), broken, "{whole:?}");
}
