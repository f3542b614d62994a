//! Sessions under load against their ground truth: profiles/replicas.toml, one step, against
//! two replicas of the built-in target behind round-robin (sessions lost) and behind sticky
//! (none lost). mcpload's whole-run `session_lost` equals the replicas' own count of
//! unknown-session answers exactly, every session the target opened is a handshake's or a
//! re-initialization's, and the cost shows in the counts: refused attempts, retries, time
//! spent re-initializing.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use serde_json::Value;
use std::path::{Path, PathBuf};

const WORKERS: u64 = 2;

/// Runs the shipped profile for one short step at 8 virtual users (`extra` added); returns
/// the run folder and the exit code.
fn replicas(name: &str, extra: &[&str]) -> (PathBuf, Option<i32>) {
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/replicas.toml");
    let dir = scratch(name).join("run");
    let workers = WORKERS.to_string();
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
fn check_ground_truth(dir: &Path) -> (Value, Value) {
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
        WORKERS + u(sessions, "/reinitializations") + u(sessions, "/reinit_failed"),
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
    let (dir, code) = replicas("sessions-round-robin", &[]);
    // The profile's gate, session_lost==0, fails.
    assert_eq!(code, Some(1));
    let (summary, target) = check_ground_truth(&dir);
    let sessions = &summary["sessions"];
    assert!(u(sessions, "/session_lost") > 0, "{sessions}");
    assert!(u(sessions, "/reinitializations") > 0, "{sessions}");
    assert!(sessions["reinit_ms"].as_f64().unwrap() > 0.0, "{sessions}");
    let unknown: Vec<u64> = (target["replicas"].as_array().unwrap().iter())
        .map(|r| u(r, "/unknown_session"))
        .collect();
    assert!(
        unknown.iter().all(|n| *n > 0),
        "both replicas refused: {unknown:?}"
    );
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
        &["--builtin-knob", "balance=sticky", "--session-lost-on-400"],
    );
    assert_eq!(code, Some(0));
    let (summary, target) = check_ground_truth(&dir);
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
