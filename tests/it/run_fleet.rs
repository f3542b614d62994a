//! A process per session (`--process-per-user`) end to end against the built-in stdio
//! target: the children counted in /proc by the test itself (each found by a marker in its
//! environment, so no other process can be mistaken for one), start-ups timed, nothing left
//! running after the run, and churn without a leaked descriptor in mcpload itself.

use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{line, serve_cmd};
use std::path::PathBuf;
use std::time::Duration;

/// How long one fleet run may take in all.
const BUDGET: Duration = Duration::from_secs(120);

/// The processes whose environment holds `MCPLOAD_FLEET_MARK=mark`: the children of one
/// test's run, and nothing else.
fn marked(mark: &str) -> Vec<u32> {
    let needle = format!("MCPLOAD_FLEET_MARK={mark}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle.as_bytes()))
        })
        .collect()
}

/// Descriptors process `pid` holds open now.
fn fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// A fleet run of the built-in stdio target with `args`, its children marked `name`;
/// returns the folder, the run as watched, and the most children seen alive at once.
fn fleet_run(
    name: &str,
    target: &[&str],
    args: &[&str],
    each: impl FnMut(u32),
) -> (PathBuf, Watched) {
    let dir = scratch(name).join("run");
    let mark = format!("{name}-{}", std::process::id());
    let env = format!("MCPLOAD_FLEET_MARK={mark}");
    let stdio = line(&serve_cmd(target));
    let out = dir.display().to_string();
    let mut all = vec!["--stdio", &stdio, "--process-per-user", "--child-env", &env];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", &out]);
    let mut cmd = crate::support::bin();
    cmd.arg("run").arg("--quiet").args(&all);
    let watched = watch_each(cmd, BUDGET, each);
    assert!(!watched.overran, "the run overran {BUDGET:?}");
    assert_eq!(
        watched.output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&watched.output.stderr)
    );
    assert!(
        marked(&mark).is_empty(),
        "children still running after the run: {:?}",
        marked(&mark)
    );
    (dir, watched)
}

#[test]
fn sixty_four_users_start_exactly_sixty_four_children_and_leave_none() {
    let mark = format!("sixty_four-{}", std::process::id());
    let mut most = 0;
    let (dir, _) = fleet_run(
        "sixty_four",
        &["--stdio"],
        &["-c", "64", "-d", "3s", "--warmup", "0s", "--timeout", "30s"],
        |_| most = most.max(marked(&mark).len()),
    );
    // Seen by the test itself, every 50 ms: never more than one child per user, and all of
    // them at once.
    assert_eq!(most, 64, "children alive at once, as /proc showed them");
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert_eq!(num(row, "processes_max"), 64.0);
    assert_eq!(num(row, "requests"), num(row, "ok"));
    assert!(num(row, "requests") > 64.0, "every user called: {row:?}");
    assert_eq!(num(row, "process_exits"), 0.0);
    assert_eq!(num(row, "stdout_pollution"), 0.0);
    for col in [
        "spawn_p50_ms",
        "spawn_p99_ms",
        "connect_p50_ms",
        "connect_p99_ms",
    ] {
        assert!(num(row, col) > 0.0, "{col}: {row:?}");
    }
    assert!(num(row, "spawn_p99_ms") >= num(row, "spawn_p50_ms"));
    // Connecting includes spawning.
    assert!(num(row, "connect_p50_ms") >= num(row, "spawn_p50_ms"));
    let p = &summary(&dir)["processes"];
    assert_eq!(p["mode"], "per_user");
    assert_eq!(p["started"], 64, "{p}");
    assert_eq!(p["start_failures"], 0);
    assert_eq!(p["exits_total"], 0);
    // The first user's child is the connect's: its stderr is target-stderr.log; the others'
    // are under children/.
    let logs = std::fs::read_dir(dir.join("children")).unwrap().count();
    assert_eq!(logs, 63);
}

#[test]
fn churned_sessions_start_a_child_each_and_leak_nothing_in_mcpload() {
    let mark = format!("churn-{}", std::process::id());
    let mut fds_seen: Vec<usize> = Vec::new();
    let mut most = 0;
    let (dir, _) = fleet_run(
        "churn",
        &["--stdio"],
        &[
            "--protocol",
            "2025-11-25",
            "-c",
            "4",
            "-d",
            "8s",
            "--warmup",
            "0s",
            "--session-calls",
            "2",
            "--cooldown",
            "3s",
        ],
        |pid| {
            fds_seen.extend(fds(pid));
            most = most.max(marked(&mark).len());
        },
    );
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert_eq!(num(row, "requests"), num(row, "ok"), "{row:?}");
    let p = &summary(&dir)["processes"];
    let started = p["started"].as_u64().unwrap();
    // Two calls a session: every second call started a child (the last sessions' children
    // may have had one call only when the step ended).
    let calls = num(row, "requests") as u64;
    assert!(
        started >= calls / 2 && started <= calls / 2 + 4 + 1,
        "{started} children for {calls} calls"
    );
    assert!(
        started >= 200,
        "too little churn to judge a leak: {started}"
    );
    assert_eq!(p["start_failures"], 0);
    assert_eq!(p["exits_total"], 0, "{p}");
    // A session's child goes before or while the next starts: at most two a user at once.
    assert!(most <= 8, "{most} children alive at once for 4 users");
    // mcpload's own descriptors: at the start against the cool-down's, hundreds of
    // sessions later. A descriptor leaked per session would show as hundreds; children
    // coming and going hold 4 each (three pipes and a stderr file).
    let early = fds_seen[..fds_seen.len().min(10)]
        .iter()
        .max()
        .copied()
        .unwrap();
    let late = *fds_seen.last().unwrap();
    assert!(
        late <= early + 4 * 8,
        "mcpload held {early} descriptors at the start and {late} at the end"
    );
}
