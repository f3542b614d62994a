//! `mcpload probe`'s task and input-required probes (the binary, `--json`) against the
//! built-in target, whose task support is known and whose `/stats` is the ground truth of
//! each round trip: 2025-11-25 (core tasks; `task_only` requires a task, `slow_task` allows
//! one), 2026-07-28 (the tasks extension; `ask_input`'s input rounds), over HTTP and stdio;
//! pinned to 2025-06-18, a server without tasks; and with each task fault on, a verdict that
//! names what went wrong. (The TypeScript "everything" server's task support is probed in
//! probe_servers.rs, beside its other verdicts.)

use crate::support::bin;
use crate::support::servers::*;
use serde_json::{Value, json};

fn probe(args: &[&str]) -> Value {
    let out = bin()
        .arg("probe")
        .args(["--json", "--wait", "400ms"])
        .args(args)
        .output()
        .expect("running mcpload probe");
    assert!(
        out.status.success(),
        "mcpload probe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("probe --json prints JSON")
}

/// The result of `probe` in the report.
fn row<'a>(report: &'a Value, probe: &str) -> &'a Value {
    report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == probe)
        .unwrap_or_else(|| panic!("no {probe} in {report:#}"))
}

/// The verdict and detail of `probe`.
fn verdict(report: &Value, probe: &str) -> (String, String) {
    let r = row(report, probe);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (text(&r["verdict"]), text(&r["detail"]))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// A task round trip that went well, checked against the target's `/stats` (`stats_before`:
/// its counts before the probe): one task created, every poll answered with a task, the
/// result taken as the revision says, polls no closer than the advised `pollInterval`.
fn assert_round_trip(report: &Value, tool: &str, url: &str, stats_before: &Value, legacy: bool) {
    assert_eq!(
        verdict(report, "task"),
        ("supported".into(), "completed".into()),
        "{report:#}"
    );
    let t = &row(report, "task")["evidence"]["task"];
    assert_eq!(t["tool"], tool, "{t:#}");
    assert!(!t["task_id"].as_str().unwrap().is_empty(), "{t:#}");
    assert_eq!(t["created"]["answer"], "task", "{t:#}");
    let statuses = strings(&t["statuses"]);
    let polls = t["polls"].as_u64().unwrap();
    // The creation's status, then one per poll: working first; then completed, confirmed by
    // one more poll.
    assert_eq!(statuses.len() as u64, polls + 1, "{t:#}");
    assert_eq!(statuses[0], "working", "{t:#}");
    assert_eq!(
        statuses[statuses.len() - 2..],
        ["completed", "completed"],
        "{t:#}"
    );
    assert_eq!(
        t["result"],
        json!({"answer": "complete", "is_error": false})
    );
    let interval = t["poll_interval_ms"].as_u64().unwrap();
    assert!(
        (polls - 1) * interval <= t["elapsed_ms"].as_u64().unwrap(),
        "every poll but the confirming one waits the advised interval: {t:#}"
    );
    let after = target_stats(url);
    let delta =
        |k: &str| after["tasks"][k].as_u64().unwrap() - stats_before["tasks"][k].as_u64().unwrap();
    assert_eq!(delta("created"), 1, "{after:#}");
    assert_eq!(delta("completed"), 1, "{after:#}");
    assert_eq!(
        delta("polls"),
        polls,
        "each poll was answered with the task"
    );
    assert_eq!(
        delta("results"),
        u64::from(legacy),
        "tasks/result only in 2025-11-25"
    );
    assert_eq!(delta("unknown_task"), 0);
}

#[test]
fn serve_under_2025_11_25_runs_a_required_and_an_optional_tool_as_tasks() {
    let server = serve(&["--task-poll-interval-ms", "50"]);
    let before = target_stats(&server.url);
    let r = probe(&["--url", &server.url, "--protocol", "2025-11-25"]);
    assert_eq!(
        r["tasks"],
        json!({
            "declared": "capabilities.tasks", "list": true, "cancel": true,
            "requests": ["tools/call"],
            "tools": [{"name": "slow_task", "task_support": "optional"},
                      {"name": "task_only", "task_support": "required"}],
        })
    );
    // A tool that requires a task is chosen first.
    assert_round_trip(&r, "task_only", &server.url, &before, true);
    let t = &row(&r, "task")["evidence"]["task"];
    assert_eq!(
        t["poll_interval_ms"], 50,
        "the server's pollInterval: {t:#}"
    );
    assert_eq!(
        t["arguments"],
        json!({"ms": 500}),
        "its duration argument is set"
    );
    assert_eq!(
        verdict(&r, "input_required"),
        ("skipped".into(), "not in 2025-11-25".into())
    );

    // The optional one, named, with its arguments.
    let before = target_stats(&server.url);
    let r = probe(&[
        "--url",
        &server.url,
        "--protocol",
        "2025-11-25",
        "--task-tool",
        "slow_task",
        "--task-args",
        r#"{"ms": 300}"#,
    ]);
    assert_round_trip(&r, "slow_task", &server.url, &before, true);
    // The table says it too.
    let out = bin()
        .args(["probe", "--wait", "300ms", "--protocol", "2025-11-25"])
        .args(["--url", &server.url])
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    for line in [
        "tasks         capabilities.tasks (list; cancel; task-augmented: tools/call)",
        "  task_only(ms) [task: required]",
        "  slow_task(ms) [task: optional]",
    ] {
        assert!(table.contains(line), "{line:?} in\n{table}");
    }
    let task_row = table.lines().find(|l| l.starts_with("task ")).unwrap();
    assert!(
        task_row.contains("supported [completed]") && task_row.contains("tool task_only"),
        "{table}"
    );
}

#[test]
fn serve_under_2026_07_28_runs_a_task_by_the_extension_and_an_input_round() {
    let server = serve(&[]);
    let before = target_stats(&server.url);
    let r = probe(&["--url", &server.url]);
    assert_eq!(r["server"]["revision"], "2026-07-28");
    assert_eq!(r["tasks"]["declared"], "extension");
    assert_eq!(
        r["tasks"]["tools"],
        json!([]),
        "no per-tool flag in 2026-07-28"
    );
    // The result comes inline with the terminal tasks/get: no tasks/result.
    assert_round_trip(&r, "slow_task", &server.url, &before, false);

    assert_eq!(
        verdict(&r, "input_required"),
        ("supported".into(), "needs elicitation".into()),
        "{r:#}"
    );
    let i = &row(&r, "input_required")["evidence"]["input"];
    assert_eq!(i["tool"], "ask_input");
    assert_eq!(
        i["undeclared"],
        json!({"answer": "error", "code": -32021, "required": ["elicitation"]})
    );
    assert_eq!(
        i["declared"],
        json!({"answer": "input_required", "kinds": ["elicitation"], "request_state": true})
    );
    assert_eq!(i["retry"], json!({"answer": "complete", "is_error": false}));
    let input = &target_stats(&server.url)["input"];
    assert_eq!(
        (
            &input["rounds_asked"],
            &input["rounds_answered"],
            &input["completed"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "one round asked, answered validly, and the call completed: {input:#}"
    );
}

#[test]
fn serve_over_stdio_in_both_revisions() {
    let cmd = line(&serve_cmd(&["--stdio"]));
    let r = probe(&[
        "--stdio",
        &cmd,
        "--input-tool",
        "ask_input",
        "--input-args",
        r#"{"kinds": ["sampling", "roots"]}"#,
    ]);
    assert_eq!(verdict(&r, "task").0, "supported", "{r:#}");
    let (v, needs) = verdict(&r, "input_required");
    assert_eq!(v, "supported", "{r:#}");
    assert!(
        needs.starts_with("needs ") && needs.contains("sampling") && needs.contains("roots"),
        "{needs}"
    );
    let r = probe(&["--stdio", &cmd, "--protocol", "2025-11-25"]);
    assert_eq!(
        verdict(&r, "task"),
        ("supported".into(), "completed".into())
    );
    let t = &row(&r, "task")["evidence"]["task"];
    assert_eq!(t["tool"], "task_only");
}

#[test]
fn a_server_without_tasks_is_unsupported() {
    let server = serve(&[]);
    let r = probe(&["--url", &server.url, "--protocol", "2025-06-18"]);
    assert_eq!(r["tasks"]["declared"], "none");
    assert_eq!(r["tasks"]["tools"], json!([]));
    assert_eq!(verdict(&r, "task"), ("unsupported".into(), String::new()));
    assert!(row(&r, "task")["evidence"].get("task").is_none());
    assert_eq!(verdict(&r, "input_required").0, "skipped");
    assert_eq!(target_stats(&server.url)["tasks"]["created"], 0);
}

#[test]
fn each_task_fault_shows_in_the_verdict() {
    // (fault, verdict, what its detail starts with)
    let cases = [
        ("forget=1", "broken", "tasks/get did not know the task"),
        ("regress=1", "broken", "status completed went to working"),
        (
            "mismatch=1",
            "broken",
            "failed with a result that disagrees (complete)",
        ),
        ("get-error=2", "broken", "polls answered error"),
        ("never-ends=1", "unfinished", "still working after"),
    ];
    for (fault, want, detail) in cases {
        let server = serve(&["--task-fault", fault]);
        let r = probe(&["--url", &server.url, "--task-wait", "1500ms"]);
        let (v, d) = verdict(&r, "task");
        assert_eq!(v, want, "{fault}: {r:#}");
        assert!(d.starts_with(detail), "{fault}: {d:?}");
        let stats = target_stats(&server.url);
        assert_eq!(stats["tasks"]["created"], 1, "{fault}: {stats:#}");
        let t = &row(&r, "task")["evidence"]["task"];
        if fault == "never-ends=1" {
            // Cancelled at the end of the wait.
            assert_eq!(t["unfinished"], true);
            assert!(t["cancel"]["answer"].is_string(), "{t:#}");
            assert_ne!(t["cancel"]["answer"], "no_answer", "{t:#}");
            assert_ne!(t["cancel"]["answer"], "error", "{t:#}");
            assert_eq!(stats["tasks"]["cancels"], 1, "{stats:#}");
        } else {
            assert_eq!(t["unfinished"], false, "{fault}: {t:#}");
            assert_eq!(stats["tasks"]["cancels"], 0, "{fault}: {stats:#}");
        }
    }
}
