//! Every fault knob of the built-in target on at once: each step's counters in steps.csv equal
//! what the target says a correct client counts (its ground truth), over HTTP with JSON and
//! with SSE answers, single requests and batches.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{serve, target_stats};

/// Every knob at a different prime period, so that each fires and they rarely coincide.
pub(crate) const FAULTS: &str = "drop=7,null-id=11,unknown-id=13,duplicate=17,both=19,\
bad-version=23,garbage=29,truncate=31,version-rejected=37,tool-error=41,bad-structured=43";

/// Every fault kind, as `/stats` names them.
pub(crate) const KINDS: [&str; 11] = [
    "drop",
    "null_id",
    "unknown_id",
    "duplicate",
    "both",
    "bad_version",
    "garbage",
    "truncate",
    "version_rejected",
    "tool_error",
    "bad_structured",
];

/// The counts of a result that is not ok, compared per operation with the target's.
const RESULT_CLASSES: [&str; 2] = ["tool_errors", "output_schema_violations"];

/// Runs one closed-loop step against a served target and compares with its /stats; returns
/// the step's steps.csv row.
fn check(
    name: &str,
    serve_args: &[&str],
    run_args: &[&str],
    kinds: &[&str],
) -> std::collections::HashMap<String, String> {
    let _share = machine::loading();
    let target = serve(serve_args);
    let before = target_stats(&target.url);
    let dir = scratch(name);
    let out_dir = dir.join("run");
    let mut args = vec![
        "--url",
        &target.url,
        "--workers",
        "1",
        "-c",
        "8",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--timeout",
        "2s",
        "--keep-going",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(run_args);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{name}");
    let after = target_stats(&target.url);
    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_identity(row);
    let delta = |path: &str| {
        let get = |v: &serde_json::Value| v.pointer(path).and_then(|x| x.as_u64()).unwrap_or(0);
        (get(&after) - get(&before)) as f64
    };
    check_faults_and_handshake(name, row, &delta, kinds);
    let ops = table(&out_dir, "ops.csv");
    for op in ops.iter().filter(|o| o["op"] != "-") {
        for col in RESULT_CLASSES {
            let path = format!("/operations/{}/client_view/{col}", op["op"]);
            assert_eq!(delta(&path), num(op, col), "{name}: {} {col}", op["op"]);
        }
    }
    for col in [
        "tool_errors",
        "output_schema_violations",
        "errors",
        "both_result_error",
        "invalid_jsonrpc",
        "duplicate_id",
        "unknown_id",
        "null_id",
        "server_messages",
        "parse_errors",
        "missing",
        "http_other",
        "response_count_mismatch",
    ] {
        assert_eq!(
            delta(&format!("/client_view/{col}")),
            num(row, col),
            "{name}: {col}"
        );
    }
    for col in ["http_429", "http_503", "batches", "batch_rejected"] {
        assert_eq!(delta(&format!("/{col}")), num(row, col), "{name}: {col}");
    }
    assert_eq!(
        num(row, "timeouts"),
        0.0,
        "{name}: every fault ends its request at once"
    );
    rows.into_iter().next().unwrap()
}

/// Every kind of fault fired, and the handshake (discovery or initialize, tools/list), which
/// came before the step, was all answered ok: so the target's `ok` less the handshake is the
/// step's. `stat` reads a counter of the target's ground truth by JSON pointer.
fn check_faults_and_handshake(
    name: &str,
    row: &std::collections::HashMap<String, String>,
    stat: &dyn Fn(&str) -> f64,
    kinds: &[&str],
) {
    for kind in kinds {
        assert!(
            stat(&format!("/faults/{kind}")) > 0.0,
            "{name}: no {kind} fault fired"
        );
    }
    // Each refused -32022 as a 2026-07-28 server refuses a version: of `errors`, never ok.
    assert_eq!(
        num(row, "version_rejected"),
        stat("/faults/version_rejected"),
        "{name}: version_rejected"
    );
    let handshake = stat("/requests_seen") - num(row, "requests");
    assert!(
        (1.0..=4.0).contains(&handshake),
        "{name}: {handshake} handshake requests"
    );
    assert_eq!(
        stat("/client_view/ok") - handshake,
        num(row, "ok"),
        "{name}: ok"
    );
}

#[test]
fn json_answers_single_requests() {
    check("faults-json", &["--fault", FAULTS], &[], &KINDS);
}

/// `version-rejected` refused with id null (HTTP 400, the -32022 error for none of the
/// request's ids): each such request ends `http_other`, and `version_rejected` counts it
/// there, exactly as many as the target refused.
#[test]
fn version_refusals_without_id_are_http_other() {
    for (name, answer) in [
        ("faults-refused-json", "json"),
        ("faults-refused-sse", "sse"),
    ] {
        let row = check(
            name,
            &[
                "--fault",
                FAULTS,
                "--answer",
                answer,
                "--version-rejected-without-id",
            ],
            &[],
            &KINDS,
        );
        // Nothing else ends `http_other` here: the refusals are all of it.
        assert!(num(&row, "version_rejected") > 0.0, "{name}");
        assert_eq!(
            num(&row, "http_other"),
            num(&row, "version_rejected"),
            "{name}"
        );
    }
}

#[test]
fn sse_answers_single_requests() {
    check(
        "faults-sse",
        &["--fault", FAULTS, "--answer", "sse"],
        &[],
        &KINDS,
    );
}

#[test]
fn json_answers_batches() {
    check(
        "faults-batch",
        &["--fault", FAULTS, "--batches", "accept"],
        &[
            "--protocol",
            "2025-03-26",
            "--batch-size",
            "5",
            "--batch-notifications",
            "1",
        ],
        // 2025-03-26 has no outputSchema: `bad-structured` finds nothing to break.
        &KINDS[..10],
    );
}

/// Over stdio no exchange closes on its own: a request whose answer never pairs waits for
/// its timeout. So what the target calls `missing` the client ends as `timeouts`.
#[test]
fn stdio_single_requests() {
    let _share = machine::loading();
    let dir = scratch("faults-stdio");
    let stats_file = dir.join("target-stats.json");
    let command = format!(
        "{} serve --stdio --fault {FAULTS} --stats {}",
        env!("CARGO_BIN_EXE_mcpload"),
        stats_file.display()
    );
    let out_dir = dir.join("run");
    let out = run(&[
        "--stdio",
        &command,
        "-c",
        "8",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--timeout",
        "500ms",
        "--keep-going",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats_file).unwrap()).unwrap();
    let rows = steps(&out_dir);
    let row = &rows[0];
    assert_identity(row);
    let get = |path: &str| stats.pointer(path).and_then(|v| v.as_u64()).unwrap() as f64;
    check_faults_and_handshake("stdio", row, &get, &KINDS);
    for col in [
        "tool_errors",
        "output_schema_violations",
        "errors",
        "both_result_error",
        "invalid_jsonrpc",
        "duplicate_id",
        "unknown_id",
        "null_id",
        "parse_errors",
    ] {
        assert_eq!(get(&format!("/client_view/{col}")), num(row, col), "{col}");
    }
    assert_eq!(
        get("/client_view/missing"),
        num(row, "timeouts"),
        "missing answers time out"
    );
    assert_eq!(num(row, "missing"), 0.0);
    assert!(
        std::fs::metadata(out_dir.join("target-stderr.log")).is_ok(),
        "the child's stderr is kept in the run folder"
    );
}

/// `--tool-errors ok`: the target's tool errors are counted `ok` (and in goodput), none in
/// `tool_errors`; without it the same run counts them apart, out of `ok`.
#[test]
fn tool_errors_ok_moves_them_to_ok() {
    let _share = machine::loading();
    for (flag, counted_ok) in [(None, false), (Some("ok"), true)] {
        let target = serve(&["--fault", "tool-error=3,drop=7"]);
        let before = target_stats(&target.url);
        let dir = scratch(&format!("tool-errors-{counted_ok}"));
        let out_dir = dir.join("run");
        let mut args = vec![
            "--url",
            &target.url,
            "--workers",
            "1",
            "-c",
            "4",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--timeout",
            "2s",
            "--keep-going",
            "--out",
            out_dir.to_str().unwrap(),
        ];
        if let Some(v) = flag {
            args.extend_from_slice(&["--tool-errors", v]);
        }
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0));
        let after = target_stats(&target.url);
        let delta = |path: &str| {
            let get = |v: &serde_json::Value| v.pointer(path).and_then(|x| x.as_u64()).unwrap();
            (get(&after) - get(&before)) as f64
        };
        let rows = steps(&out_dir);
        let row = &rows[0];
        assert_identity(row);
        let tool_errors = delta("/client_view/tool_errors");
        assert!(tool_errors > 0.0, "the fault fired");
        let handshake = delta("/requests_seen") - num(row, "requests");
        let ok = delta("/client_view/ok") - handshake;
        if counted_ok {
            assert_eq!(num(row, "tool_errors"), 0.0);
            assert_eq!(num(row, "ok"), ok + tool_errors);
        } else {
            assert_eq!(num(row, "tool_errors"), tool_errors);
            assert_eq!(num(row, "ok"), ok);
            assert!(!row["tool_error"].is_empty(), "the first tool error's text");
        }
        let goodput = num(row, "goodput_rps") * num(row, "duration_s");
        assert!(
            (goodput - num(row, "ok")).abs() < 0.5,
            "goodput counts ok: {goodput} vs {}",
            num(row, "ok")
        );
    }
}
