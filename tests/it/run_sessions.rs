//! Sessions under load against their ground truth: profiles/replicas.toml, one step, against
//! two replicas of the built-in target behind round-robin (sessions lost) and behind sticky
//! (none lost). mcpload's whole-run `session_lost` equals the replicas' own count of
//! unknown-session answers exactly, every session the target opened is a handshake's or a
//! re-initialization's, and the cost shows in the counts: refused attempts, retries, time
//! spent re-initializing.
//!
//! Round-robin runs one worker, so that a session is lost for certain: its second connection
//! goes to the other replica. With two workers whose connections happen to alternate (the
//! first worker's all land on one replica, the second's on the other), no session is lost,
//! and under a busy machine that interleaving came up.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Runs the shipped profile for one short step at 8 virtual users over `workers` workers
/// (`extra` added); returns the run folder and the exit code.
fn replicas(name: &str, workers: u64, extra: &[&str]) -> (PathBuf, Option<i32>) {
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/replicas.toml");
    let dir = scratch(name).join("run");
    let workers = workers.to_string();
    let mut args = vec![
        profile.to_str().unwrap(),
        "-c",
        "8",
        "--duration",
        "1s",
        "--warmup",
        "300ms",
        "--workers",
        &workers,
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    (dir, out.status.code())
}

fn target_stats(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("target-stats.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// What holds under any balance: the whole run's `session_lost` is the target's count of
/// unknown-session answers, the replicas' counts add up to it, and every session the target
/// opened was a handshake's (one per worker) or a re-initialization's.
fn check_ground_truth(dir: &Path, workers: u64) -> (Value, Value) {
    let summary = summary(dir);
    let target = target_stats(dir);
    let sessions = &summary["sessions"];
    assert_eq!(
        u(sessions, "/session_lost"),
        u(&target, "/unknown_session"),
        "{sessions}"
    );
    let per_replica: u64 = (target["replicas"].as_array().unwrap().iter())
        .map(|r| u(r, "/unknown_session"))
        .sum();
    assert_eq!(per_replica, u(&target, "/unknown_session"));
    assert_eq!(
        u(&target, "/sessions_opened"),
        workers + u(sessions, "/reinitializations") + u(sessions, "/reinit_failed"),
        "{sessions} {target}"
    );
    for row in steps(dir) {
        assert_identity(&row);
        assert!(num(&row, "session_lost") <= u(sessions, "/session_lost") as f64);
    }
    for step in summary["steps"].as_array().unwrap() {
        let by_cause = &step["retries_by_cause"];
        assert_eq!(
            u(step, "/retries"),
            u(by_cause, "/session_reinit") + u(by_cause, "/reconnect_before_send"),
            "{step}"
        );
        // Each session retry replaces an attempt that ended http_other.
        assert!(
            u(by_cause, "/session_reinit") <= u(step, "/http_other"),
            "{step}"
        );
    }
    (summary, target)
}

#[test]
fn round_robin_loses_sessions_and_mcpload_counts_every_loss_the_replicas_answered() {
    let _share = machine::loading();
    let (dir, code) = replicas("sessions-round-robin", 1, &[]);
    // The profile's gate, session_lost==0, fails.
    assert_eq!(code, Some(1));
    let (summary, target) = check_ground_truth(&dir, 1);
    let sessions = &summary["sessions"];
    assert!(u(sessions, "/session_lost") > 0, "{sessions}");
    assert!(u(sessions, "/reinitializations") > 0, "{sessions}");
    assert!(sessions["reinit_ms"].as_f64().unwrap() > 0.0, "{sessions}");
    // Which replicas refused turns on which connection each re-initialization took: at
    // least the one the first session never saw did.
    let refusing = (target["replicas"].as_array().unwrap().iter())
        .filter(|r| u(r, "/unknown_session") > 0)
        .count();
    assert!(refusing >= 1, "{target}");
    // The cost: requests the server refused, each sent again as a new request.
    let step = &summary["steps"][0];
    assert!(u(step, "/session_lost") > 0, "{step}");
    assert!(u(step, "/retries_by_cause/session_reinit") > 0, "{step}");
    assert!(u(step, "/requests") > u(step, "/ok"), "{step}");
    assert!(step["error_rate"].as_f64().unwrap() > 0.0, "{step}");
    assert!(!summary["gates"][0]["holds"].as_bool().unwrap());
}

#[test]
fn sticky_loses_no_session() {
    let _share = machine::loading();
    let (dir, code) = replicas(
        "sessions-sticky",
        2,
        &["--builtin-knob", "balance=sticky", "--session-lost-on-400"],
    );
    assert_eq!(code, Some(0));
    let (summary, target) = check_ground_truth(&dir, 2);
    assert_eq!(
        summary["settings"]["target"]["builtin"]["balance"],
        "sticky"
    );
    assert_eq!(summary["settings"]["session_lost_on_400"], true);
    let sessions = &summary["sessions"];
    assert_eq!(u(sessions, "/session_lost"), 0, "{sessions}");
    assert_eq!(u(sessions, "/reinitializations"), 0, "{sessions}");
    assert_eq!(u(&target, "/unknown_session"), 0);
    // One session on each replica (the workers' first connections go to one each), and
    // every request answered.
    let opened: Vec<u64> = (target["replicas"].as_array().unwrap().iter())
        .map(|r| u(r, "/sessions_opened"))
        .collect();
    assert_eq!(opened, [1, 1]);
    let step = &summary["steps"][0];
    assert_eq!(u(step, "/requests"), u(step, "/ok"), "{step}");
    assert_eq!(u(step, "/retries"), 0, "{step}");
    assert!(summary["gates"][0]["holds"].as_bool().unwrap());
}
