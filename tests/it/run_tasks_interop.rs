//! Task mode against a real third-party server: the shipped profiles/everything-tasks.toml,
//! shortened by flags, runs the TypeScript "everything" server's `simulate-research-query`
//! (its `execution.taskSupport` is `required`, 2025-11-25) as tasks over Streamable HTTP
//! and over stdio. Every call becomes a task that completes, and is answered through
//! `tasks/result`; no anomaly of any kind; polls per task fit the server's four stages of
//! 1 s polled every 250 ms.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{everything_cmd, line, start_http};
use serde_json::Value;
use std::path::Path;

/// The profile's `poll_interval` (shorter than the server's advised 1 s, so it is used).
const POLL_MS: f64 = 250.0;
/// The research query's four stages of 1 s: no task can end sooner.
const STAGES_MS: f64 = 4000.0;

/// Runs the shipped profile against `target_flags` for one step of 3 clients and 2 s (each
/// client's one call is a task of about 4 s, finished within the graceful stop); returns the
/// run folder.
fn run_everything_tasks(scratch_name: &str, target_flags: &[&str]) -> std::path::PathBuf {
    let out_dir = scratch(scratch_name).join("run");
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/everything-tasks.toml");
    let mut args = vec![
        profile.to_str().unwrap(),
        "--concurrency",
        "3",
        "--duration",
        "2s",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(target_flags);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "the profile's gates hold");
    out_dir
}

/// Every call was a task that completed and was answered; nothing else happened.
fn assert_tasks_consistent(dir: &Path) {
    let rows = steps(dir);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_identity(row);
    for col in ["task_anomalies", "missing", "timeouts", "errors"] {
        assert_eq!(num(row, col), 0.0, "{col}: {row:?}");
    }
    let step = &summary(dir)["steps"][0];
    assert_eq!(step["anomalies"], 0, "{step:#}");
    let f = &step["flows"];
    let n = |k: &str| {
        f[k].as_u64()
            .unwrap_or_else(|| panic!("no flows.{k} in {f:#}"))
    };
    let calls = n("calls");
    assert!(calls >= 3, "each client made a call: {f:#}");
    for k in [
        "calls_answered",
        "calls_ok",
        "tasks_created",
        "tasks_completed",
    ] {
        assert_eq!(n(k), calls, "{k}: {f:#}");
    }
    for k in [
        "calls_failed",
        "calls_interrupted",
        "tasks_failed",
        "tasks_cancelled",
        "tasks_expired",
        "tasks_unfinished",
        "task_status_regressed",
        "task_forgotten",
        "task_result_mismatch",
        "task_id_reused",
        "task_poll_errors",
        "input_rounds",
    ] {
        assert_eq!(n(k), 0, "{k}: {f:#}");
    }
    // 2025-11-25: one tasks/result per task; each poll is a tasks/get of ops.csv.
    let ops = table(dir, "ops.csv");
    let op = |name: &str| {
        ops.iter()
            .find(|r| r["op"] == name)
            .map_or(0.0, |r| num(r, "requests"))
    };
    assert_eq!(op("tasks/result"), calls as f64, "{ops:?}");
    assert_eq!(op("tasks/get"), n("task_polls") as f64, "{ops:?}");
    assert_eq!(op("tasks/cancel"), 0.0, "{ops:?}");
    assert_eq!(op("simulate-research-query"), calls as f64, "{ops:?}");
    assert_polls_fit_the_stages(f);
}

/// Polls per task against the server's timing: a task ends no sooner than its four stages,
/// and the k-th poll goes out no sooner than k intervals after the call was due, so no task
/// is polled more often than its time to terminal allows.
fn assert_polls_fit_the_stages(f: &Value) {
    let ms = |k: &str| f[k].as_f64().unwrap_or_else(|| panic!("no {k} in {f:#}"));
    // The histograms keep 3 significant digits: allow their rounding.
    assert!(ms("time_to_terminal_p50_ms") >= STAGES_MS * 0.999, "{f:#}");
    let polls_max = ms("polls_per_task_max");
    assert!(polls_max >= 1.0, "{f:#}");
    assert!(
        polls_max <= ms("time_to_terminal_p99_ms") * 1.001 / POLL_MS,
        "polled faster than every {POLL_MS} ms: {f:#}"
    );
    assert!(
        f["task_polls"].as_u64().unwrap() >= f["tasks_created"].as_u64().unwrap(),
        "{f:#}"
    );
}

#[test]
fn everything_research_queries_run_as_tasks_over_http() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    let dir = run_everything_tasks("tasks-everything-http", &["--url", &server.url]);
    assert_tasks_consistent(&dir);
}

#[test]
fn everything_research_queries_run_as_tasks_over_stdio() {
    let _share = machine::loading();
    let cmd = line(&everything_cmd("stdio"));
    let dir = run_everything_tasks("tasks-everything-stdio", &["--stdio", &cmd]);
    assert_tasks_consistent(&dir);
}
