//! `mcpload probe` (the binary, `--json`) against each real server: the verdicts match how
//! each is known to behave (the "everything" server answers batches and loses one of two
//! colliding ids, and runs its research query as a task; the Python server rejects batches
//! and has no tasks; over stdio both stay silent).

use crate::support::bin;
use crate::support::machine;
use crate::support::servers::*;
use serde_json::Value;

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

fn verdict<'a>(report: &'a Value, probe: &str, variant: Option<&str>) -> &'a str {
    report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == probe && p["variant"].as_str() == variant)
        .and_then(|p| p["verdict"].as_str())
        .unwrap_or_else(|| panic!("no {probe} {variant:?} in {report:#}"))
}

fn evidence<'a>(report: &'a Value, probe: &str) -> &'a Value {
    &report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == probe)
        .unwrap()["evidence"]
}

/// Checks every `(probe, variant, verdict)`, showing the whole report on a mismatch.
fn expect(report: &Value, rows: &[(&str, Option<&str>, &str)]) {
    for (p, v, want) in rows {
        assert_eq!(verdict(report, p, *v), *want, "{p} {v:?} in {report:#}");
    }
}

#[test]
fn everything_over_http_answers_batches_and_loses_a_colliding_id() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    let r = probe(&["--url", &server.url]);
    assert_eq!(r["transport"], "http");
    assert_eq!(r["server"]["era"], "legacy");
    assert_eq!(r["server"]["revision"], "2025-11-25");
    assert_eq!(r["server"]["session"], true);
    assert!(
        r["server"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );
    expect(
        &r,
        &[
            ("batch", None, "answered"),
            ("notification_only_batch", None, "no_answer"),
            ("id_collision", Some("batch"), "one_lost"),
            ("id_collision", Some("concurrent"), "both_answered"),
            ("null_id_request", None, "rejected_with_error"),
            ("malformed_json", None, "parse_error_with_null_id"),
            ("unknown_method", None, "method_not_found"),
            ("cancel", None, "stopped"),
        ],
    );
    assert_eq!(
        evidence(&r, "batch")["content_type"][0],
        "text/event-stream"
    );
    assert_research_query_is_a_task(&r);
}

/// The everything server declares tasks (2025-11-25) and `simulate-research-query` requires
/// one; the probe's round trip creates it, polls it at the advised interval through four
/// stages of 1 s to `completed`, and takes its result with `tasks/result`.
fn assert_research_query_is_a_task(r: &Value) {
    assert_eq!(r["tasks"]["declared"], "capabilities.tasks", "{r:#}");
    assert_eq!(r["tasks"]["requests"], serde_json::json!(["tools/call"]));
    assert_eq!(
        r["tasks"]["tools"],
        serde_json::json!([{"name": "simulate-research-query", "task_support": "required"}])
    );
    expect(
        r,
        &[
            ("task", None, "supported"),
            ("input_required", None, "skipped"),
        ],
    );
    let t = &evidence(r, "task")["task"];
    assert_eq!(t["tool"], "simulate-research-query");
    let statuses: Vec<&str> = t["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(statuses[0], "working", "{t:#}");
    assert_eq!(statuses[statuses.len() - 2..], ["completed", "completed"]);
    assert_eq!(t["result"]["answer"], "complete", "{t:#}");
    assert_eq!(t["result"]["is_error"], false, "{t:#}");
    let interval = t["poll_interval_ms"].as_u64().unwrap();
    let (polls, elapsed) = (
        t["polls"].as_u64().unwrap(),
        t["elapsed_ms"].as_u64().unwrap(),
    );
    assert!(elapsed >= 4000, "four stages of 1 s: {t:#}");
    assert!(polls >= 2, "a terminal poll and its confirmation: {t:#}");
    assert!(
        (polls - 1) * interval <= elapsed,
        "polled no faster than the advised interval: {t:#}"
    );
}

#[test]
fn everything_over_stdio_is_silent_to_batches_null_ids_and_garbage() {
    let _share = machine::loading();
    let r = probe(&["--stdio", &line(&everything_cmd("stdio"))]);
    assert_eq!(r["transport"], "stdio");
    expect(
        &r,
        &[
            ("batch", None, "broken"),
            ("notification_only_batch", None, "no_answer"),
            ("null_id_request", None, "silent"),
            ("malformed_json", None, "silent"),
            ("unknown_method", None, "method_not_found"),
            ("task", None, "supported"),
        ],
    );
    assert_eq!(
        evidence(&r, "task")["task"]["tool"],
        "simulate-research-query"
    );
}

#[test]
fn python_over_http_rejects_batches_in_both_eras() {
    let _share = machine::loading();
    let server = start_http(&python_cmd(&["http"]));
    let r = probe(&["--url", &server.url]);
    assert_eq!(r["server"]["revision"], "2026-07-28");
    expect(
        &r,
        &[
            ("batch", None, "rejected"),
            ("id_collision", Some("batch"), "rejected"),
            ("empty_batch", None, "invalid_request"),
            ("malformed_json", None, "parse_error_with_null_id"),
            ("unknown_method", None, "method_not_found"),
            ("cancel", None, "stopped"),
            // No tasks extension, and no tool that asks for input.
            ("task", None, "unsupported"),
            ("input_required", None, "skipped"),
        ],
    );
    assert_eq!(evidence(&r, "batch")["error_codes"][0], -32600);
    assert_eq!(evidence(&r, "unknown_method")["status"][0], 404);

    let r = probe(&["--url", &server.url, "--protocol", "2025-11-25"]);
    assert_eq!(r["server"]["era"], "legacy");
    expect(
        &r,
        &[
            ("batch", None, "rejected"),
            ("null_id_request", None, "silent"),
            ("unknown_method", None, "method_not_found"),
        ],
    );
    assert_eq!(evidence(&r, "batch")["error_codes"][0], -32602);
    assert_eq!(evidence(&r, "batch")["status"][0], 400);
}

#[test]
fn python_over_stdio_is_silent_to_batches_null_ids_and_garbage() {
    let _share = machine::loading();
    let r = probe(&["--stdio", &line(&python_cmd(&["stdio"]))]);
    assert_eq!(r["server"]["revision"], "2026-07-28");
    expect(
        &r,
        &[
            ("batch", None, "broken"),
            ("null_id_request", None, "silent"),
            ("malformed_json", None, "silent"),
            ("unknown_method", None, "method_not_found"),
            ("cancel", None, "stopped"),
        ],
    );
}

#[test]
fn serve_over_http_and_stdio_follows_its_revision() {
    let server = serve(&[]);
    let r = probe(&["--url", &server.url]);
    assert_eq!(r["server"]["revision"], "2026-07-28");
    expect(
        &r,
        &[
            ("batch", None, "rejected"),
            ("empty_batch", None, "invalid_request"),
            ("id_collision", Some("concurrent"), "both_answered"),
            ("malformed_json", None, "parse_error_with_null_id"),
            ("unknown_method", None, "method_not_found"),
            ("cancel", None, "stopped"),
        ],
    );
    // `--batches accept` makes it answer batches, in order, like a 2025-03-26 server.
    let server = serve(&["--batches", "accept"]);
    let r = probe(&["--url", &server.url, "--protocol", "2025-11-25"]);
    expect(
        &r,
        &[
            ("batch", None, "answered"),
            ("id_collision", Some("batch"), "both_answered"),
        ],
    );

    let r = probe(&["--stdio", &line(&serve_cmd(&["--stdio"]))]);
    expect(
        &r,
        &[
            ("batch", None, "rejected"),
            ("malformed_json", None, "parse_error_with_null_id"),
            ("unknown_method", None, "method_not_found"),
            ("cancel", None, "stopped"),
        ],
    );
}

#[test]
fn the_table_names_every_probe() {
    let server = serve(&[]);
    let out = bin()
        .args(["probe", "--wait", "300ms", "--url", &server.url])
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    for probe in [
        "batch",
        "notification_only_batch",
        "empty_batch",
        "id_collision (batch)",
        "id_collision (concurrent)",
        "null_id_request",
        "malformed_json",
        "unknown_method",
        "cancel",
        "task",
        "input_required",
    ] {
        assert!(
            table.lines().any(|l| l.starts_with(probe)),
            "{probe} in\n{table}"
        );
    }
    assert!(table.contains("protocol      2026-07-28"), "{table}");
}
