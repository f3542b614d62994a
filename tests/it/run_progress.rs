//! Progress is not a result, end to end: `mcpload run` of a mix whose `progress` calls carry a
//! progress token, against the built-in target playing each progress fault (docs/target.md,
//! "Progress faults"). The client's progress anomalies equal the target's ground truth, over
//! HTTP (SSE answers, both eras) and stdio.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{serve, target_stats};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// Every progress fault at its own period, so each fires and they rarely coincide.
const PROGRESS_FAULTS: &str = "after-result=3,down=4,unknown-token=5";

/// A mix of `progress` calls (three notifications each) that ask for progress, and echoes
/// that do not.
const MIX: &str = r#"
[[mix]]
method = "tools/call"
tool = "progress"
args = { steps = 3, ms = 1 }
progress = true
weight = 3

[[mix]]
method = "tools/call"
tool = "echo"
args = { message = "no progress asked" }
"#;

type Row = HashMap<String, String>;

/// Runs the mix for one closed-loop step of `clients` against `target` (a `[target]` key:
/// `url = …`, `stdio = …`) with `flags`; returns its steps.csv row and the `progress` row
/// of ops.csv.
fn run_mix(dir: &Path, target: &str, flags: &[&str], clients: &str) -> (Row, Row) {
    let p = profile(dir, "progress", &format!("[target]\n{target}\n{MIX}"));
    let out_dir = dir.join("run");
    let mut args = vec![p.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.extend_from_slice(&[
        "-c",
        clients,
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--timeout",
        "2s",
        "--keep-going",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 1);
    let step = rows[0].clone();
    assert_identity(&step);
    let op = table(&out_dir, "ops.csv")
        .into_iter()
        .find(|r| r["op"] == "progress")
        .expect("an ops.csv row for progress");
    // summary.json holds the same figures as steps.csv.
    let s = &summary(&out_dir)["steps"][0];
    for col in [
        "progress_notifications",
        "progress_down",
        "progressed_calls",
    ] {
        assert_eq!(s[col].as_f64(), Some(num(&step, col)), "summary.json {col}");
    }
    (step, op)
}

/// The client's counts equal the target's `progress` ground truth; every call that asked
/// for progress heard some before its end and was timed once.
fn check(name: &str, step: &Row, op: &Row, truth: &Value) {
    let truth = |k: &str| truth["progress"][k].as_u64().unwrap() as f64;
    assert_eq!(
        num(step, "progress_notifications"),
        truth("sent"),
        "{name}: every notification sent was received"
    );
    for (col, key) in [
        ("progress_after_result", "after_result"),
        ("progress_down", "down"),
        ("progress_unknown_token", "unknown_token"),
    ] {
        assert_eq!(num(step, col), truth(key), "{name}: {col}");
    }
    let calls = num(op, "requests");
    assert!(
        calls > 0.0 && num(step, "requests") > calls,
        "{name}: echoes ran too"
    );
    assert_eq!(num(step, "progress_calls"), calls, "{name}: progress_calls");
    assert_eq!(
        num(step, "progressed_calls"),
        calls,
        "{name}: samples of first progress"
    );
    assert!(num(step, "first_progress_p50_ms") > 0.0, "{name}");
    // Three notifications before each answer (after-result ones come after it).
    assert_eq!(num(step, "progress_per_call_max"), 3.0, "{name}");
    assert_eq!(num(step, "progress_per_call_p50"), 3.0, "{name}");
}

/// Over HTTP with SSE answers, in both eras: each fault counted exactly. Dropped answers end
/// their streams after the progress: `progress_then_missing`, all of `missing`.
#[test]
fn http_each_progress_fault_is_counted_exactly_in_both_eras() {
    let _share = machine::loading();
    for revision in ["2025-11-25", "2026-07-28"] {
        let target = serve(&[
            "--answer",
            "sse",
            "--progress-fault",
            PROGRESS_FAULTS,
            "--fault",
            "drop=7",
        ]);
        let dir = scratch(&format!("progress-http-{revision}"));
        let url = format!("url = '{}'", target.url);
        let (step, op) = run_mix(&dir, &url, &["--protocol", revision], "4");
        let truth = target_stats(&target.url);
        check(revision, &step, &op, &truth);
        for key in ["after_result", "down", "unknown_token"] {
            assert!(
                truth["progress"][key].as_u64() > Some(0),
                "{revision}: no {key}"
            );
        }
        let dropped_progress = num(&op, "missing");
        assert!(
            dropped_progress > 0.0,
            "{revision}: no progress call dropped"
        );
        assert_eq!(
            num(&step, "progress_then_missing"),
            dropped_progress,
            "{revision}: a dropped progress call heard progress first"
        );
        assert_eq!(
            num(&step, "missing"),
            truth["faults"]["drop"].as_f64().unwrap(),
            "{revision}: every drop is missing"
        );
    }
}

/// Over stdio each fault counted exactly too: the progress after an answer leaves with it,
/// and a step's drain takes up the lines already read. Every call sends progress after its
/// answer, the step's last one too.
#[test]
fn stdio_each_progress_fault_is_counted_exactly() {
    let _share = machine::loading();
    let dir = scratch("progress-stdio");
    let stats_file = dir.join("target-stats.json");
    let command = format!(
        "stdio = '{} serve --stdio --progress-fault after-result=1,down=4,unknown-token=5 \
         --stats {}'",
        env!("CARGO_BIN_EXE_mcpload"),
        stats_file.display()
    );
    let (step, op) = run_mix(&dir, &command, &[], "1");
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(&stats_file).unwrap()).unwrap();
    check("stdio", &step, &op, &truth);
    for key in ["after_result", "down", "unknown_token"] {
        assert!(truth["progress"][key].as_u64() > Some(0), "stdio: no {key}");
    }
    assert_eq!(num(&step, "progress_then_missing"), 0.0);
}

/// A target that reports progress as MCP says: no anomaly at all.
#[test]
fn a_faultless_target_shows_no_progress_anomaly() {
    let _share = machine::loading();
    let target = serve(&["--answer", "sse"]);
    let dir = scratch("progress-clean");
    let (step, op) = run_mix(&dir, &format!("url = '{}'", target.url), &[], "4");
    let truth = target_stats(&target.url);
    check("clean", &step, &op, &truth);
    for col in [
        "progress_after_result",
        "progress_down",
        "progress_unknown_token",
        "progress_then_missing",
    ] {
        assert_eq!(num(&step, col), 0.0, "{col}");
    }
    assert_eq!(
        num(&step, "progress_notifications"),
        3.0 * num(&op, "requests")
    );
}
