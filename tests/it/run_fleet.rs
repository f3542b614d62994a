//! A process per session (`--process-per-user`) end to end against the built-in stdio
//! target: the children counted in /proc by the test itself (each found by a marker in its
//! environment, so no other process can be mistaken for one), start-ups timed, nothing left
//! running after the run, and churn without a leaked descriptor in mcpload itself.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{line, serve_cmd};
use std::path::PathBuf;
use std::time::Duration;

/// How long one fleet run may take in all.
const BUDGET: Duration = Duration::from_secs(120);

/// The processes whose environment holds `MCPLOAD_FLEET_MARK=mark`: the children of one
/// test's run, and nothing else.
pub(crate) fn marked(mark: &str) -> Vec<u32> {
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

/// A fleet run of the built-in stdio target with `args`, its children marked `name`; `each`
/// is called with mcpload's pid every 50 ms. Returns the folder and the run as watched.
fn fleet_run(
    name: &str,
    target: &[&str],
    args: &[&str],
    each: impl FnMut(u32),
) -> (PathBuf, Watched) {
    fleet_of(name, &serve_cmd(target), args, each)
}

/// A fleet run of the stdio server `command` (see [`fleet_run`]); the children are checked
/// gone after the run.
pub(crate) fn fleet_of(
    name: &str,
    command: &[String],
    args: &[&str],
    each: impl FnMut(u32),
) -> (PathBuf, Watched) {
    let _share = machine::loading();
    let dir = scratch(name).join("run");
    let mark = format!("{name}-{}", std::process::id());
    let env = format!("MCPLOAD_FLEET_MARK={mark}");
    let stdio = line(command);
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

#[test]
fn a_child_that_exits_mid_session_fails_its_call_as_missing_and_its_user_starts_another() {
    // Each child answers 5 calls and exits (code 3) on reading the 6th: with one call in
    // flight per user, exactly one call per exit is never answered.
    let (dir, _) = fleet_run(
        "exits",
        &["--stdio", "--exit-after-calls", "5"],
        &["-c", "4", "-d", "3s", "--warmup", "0s", "--tool", "echo"],
        |_| {},
    );
    let row = &steps(&dir)[0];
    assert_identity(row);
    let exits = num(row, "process_exits");
    assert!(exits >= 4.0, "{row:?}");
    assert_eq!(num(row, "missing"), exits, "one call lost per exit");
    assert_eq!(num(row, "transport_errors"), 0.0);
    let ok = num(row, "ok");
    assert!(
        ok >= 5.0 * exits && ok <= 5.0 * (exits + 4.0),
        "{ok} ok, {exits} exits"
    );
    assert_eq!(row["target_down"], "");
    let p = &summary(&dir)["processes"];
    assert_eq!(p["exits_total"].as_f64(), Some(exits), "{p}");
    assert_eq!(p["start_failures"], 0);
    // A child per session: each exit's, and each user's last (which may have exited on the
    // step's last call, its user sending no more).
    let started = p["started"].as_f64().unwrap();
    assert!(started >= exits && started <= exits + 4.0, "{p}");
    let first = &p["exits"][0];
    assert_eq!(first["during"], "session");
    assert_eq!(first["code"], 3);
    let tail: Vec<&str> = first["stderr_tail"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(
        tail.contains(&"mcpload serve: exiting after 5 calls"),
        "{tail:?}"
    );
}

#[test]
fn a_banner_on_stdout_is_pollution_counted_once_per_child_and_skipped() {
    let (dir, _) = fleet_run(
        "banner",
        &["--stdio", "--stdout-banner", "weather server v1 ready"],
        &[
            "-c",
            "3",
            "-d",
            "2s",
            "--warmup",
            "0s",
            "--session-calls",
            "20",
        ],
        |_| {},
    );
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert_eq!(
        num(row, "requests"),
        num(row, "ok"),
        "skipped, nothing lost"
    );
    let p = &summary(&dir)["processes"];
    // Every child's banner is counted once, as a parse error too: the connect's child's
    // (read and skipped while connecting) in the first step like the later ones'.
    let started = p["started"].as_f64().unwrap();
    assert!(started >= 4.0, "{p}");
    assert_eq!(num(row, "stdout_pollution"), started, "{row:?}");
    assert_eq!(num(row, "parse_errors"), started);
    assert_eq!(p["first_stdout_pollution"], "weather server v1 ready");
}

#[test]
fn a_shared_childs_banner_counts_once_in_the_first_step() {
    // The one child's banner is read while connecting, before any step: it is still the
    // first step's pollution (and parse error), once, and no later step's.
    let _share = machine::loading();
    let dir = scratch("banner-shared").join("run");
    let stdio = line(&serve_cmd(&["--stdio", "--stdout-banner", "ready"]));
    let o = crate::support::bin()
        .args(["run", "--quiet", "--stdio", &stdio, "-c", "1,2", "-d", "1s"])
        .args(["--warmup", "0s", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows = steps(&dir);
    assert_eq!(num(&rows[0], "stdout_pollution"), 1.0, "{:?}", rows[0]);
    assert_eq!(num(&rows[0], "parse_errors"), 1.0);
    assert_eq!(num(&rows[1], "stdout_pollution"), 0.0, "{:?}", rows[1]);
    assert_eq!(num(&rows[1], "parse_errors"), 0.0);
    let p = &summary(&dir)["processes"];
    assert_eq!(p["first_stdout_pollution"], "ready", "{p}");
    assert_eq!(p["first_stdout_pollution_user"], 0);
}

#[test]
fn a_launchers_whole_process_tree_ends_with_its_session() {
    // Like `npx` or `uvx`: the child is a shell that does not exec, the server runs under it,
    // and a helper process beside the server outlives the close of stdin. Ending a session
    // ends all three; fleet_of checks /proc for anything left after the run.
    let mark = format!("launcher-{}", std::process::id());
    let server = line(&serve_cmd(&["--stdio"]));
    let launcher = [
        "sh".to_owned(),
        "-c".to_owned(),
        format!("sleep 600 & {server}; :"),
    ];
    let mut helpers = 0;
    let (dir, _) = fleet_of(
        "launcher",
        &launcher,
        &[
            "-c",
            "3",
            "-d",
            "2s",
            "--warmup",
            "0s",
            "--session-calls",
            "20",
        ],
        |_| {
            let sleeping = marked(&mark)
                .into_iter()
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "sleep")
                })
                .count();
            helpers = helpers.max(sleeping);
        },
    );
    assert!(
        helpers >= 3,
        "a helper per user was seen running: {helpers}"
    );
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert_eq!(num(row, "requests"), num(row, "ok"), "{row:?}");
    let p = &summary(&dir)["processes"];
    assert!(p["started"].as_u64().unwrap() > 3, "sessions churned: {p}");
    assert_eq!(p["exits_total"], 0, "{p}");
}

#[test]
fn the_profile_form_starts_a_child_per_user_and_bad_fleet_settings_are_usage_errors() {
    let _share = machine::loading();
    let dir = scratch("fleet-profile");
    let server = serve_cmd(&["--stdio"]);
    let stdio = serde_json::to_string(&line(&server)).unwrap();
    let text = format!(
        "name = \"fleet\"\n[target]\nstdio = {stdio}\nprocess = \"per_user\"\n\
         session_calls = 10\n[load]\nmodel = \"closed\"\nconcurrency = \"2\"\n\
         duration = \"1s\"\nwarmup = \"0s\"\n[[mix]]\nmethod = \"tools/call\"\n\
         tool = \"echo\"\nargs = {{ message = \"hi\" }}\n"
    );
    let p = profile(&dir, "fleet", &text);
    let out = dir.join("run");
    let o = run(&[p.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let s = summary(&out);
    assert_eq!(s["processes"]["mode"], "per_user", "{}", s["processes"]);
    // 2 users, 10 calls a session: every user churned at least once in a second.
    assert!(s["processes"]["started"].as_u64().unwrap() > 2);

    // Each misuse names what it needs, before anything starts (exit 2).
    let stdio_line = line(&server);
    let misuse: [(&[&str], &str); 4] = [
        (
            &["--builtin", "--process-per-user"],
            "it needs a stdio target",
        ),
        (
            &["--stdio", &stdio_line, "--process-per-user", "-r", "10"],
            "needs a closed loop",
        ),
        (
            &["--stdio", &stdio_line, "--session-calls", "5"],
            "session_duration end a child's session: they need `target.process",
        ),
        (
            &["--stdio", &stdio_line, "--fleet-memory-budget", "1GiB"],
            "fleet_memory_budget bounds a fleet of children: it needs `target.process",
        ),
    ];
    for (args, says) in misuse {
        let o = crate::support::bin()
            .arg("run")
            .args(args)
            .args(["-d", "1s", "--out"])
            .arg(dir.join("never"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dir.join("never").join("steps.csv").exists());
    }
}

#[test]
fn a_child_flooding_stderr_is_drained_to_the_end_and_its_log_stays_bounded() {
    // 4 MB on stderr from beside each server: under the shared or first child's cap
    // (target-stderr.log, 16 MiB), past every other child's (1 MiB). The writer can only
    // finish if mcpload goes on reading past the cap.
    let mark = format!("stderr_flood-{}", std::process::id());
    let server = line(&serve_cmd(&["--stdio"]));
    let flood = format!("yes 'stderr flood line' | head -c 4000000 >&2 & exec {server}");
    let launcher = ["sh".to_owned(), "-c".to_owned(), flood];
    let mut writing = usize::MAX;
    let (dir, _) = fleet_of(
        "stderr_flood",
        &launcher,
        &["-c", "2", "-d", "3s", "--warmup", "0s"],
        |_| {
            writing = marked(&mark)
                .into_iter()
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "head")
                })
                .count();
        },
    );
    assert_eq!(writing, 0, "a flood writer was still held at the run's end");
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert_eq!(num(row, "requests"), num(row, "ok"), "{row:?}");
    const FULL: &str = "\n[mcpload: the file is full; later stderr is dropped]\n";
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let (first, later) = (read("target-stderr.log"), read("children/user-1.log"));
    assert_eq!(first.len(), 4_000_000, "all of it, under the cap");
    assert_eq!(
        later.len(),
        (1 << 20) + FULL.len(),
        "the cap, and a line that says so"
    );
    assert!(later.ends_with(FULL.as_bytes()));
}

#[test]
fn start_up_time_is_measured_from_the_spawn_to_the_handshake() {
    let (dir, _) = fleet_run(
        "startup",
        &["--stdio", "--startup-ms", "400"],
        &[
            "--protocol",
            "2025-06-18",
            "-c",
            "3",
            "-d",
            "2s",
            "--warmup",
            "0s",
        ],
        |_| {},
    );
    let row = &steps(&dir)[0];
    // Lower bounds only: the machine may be slow, never fast beyond the sleep.
    assert!(num(row, "connect_p50_ms") >= 400.0, "{row:?}");
    assert!(num(row, "spawn_p99_ms") < num(row, "connect_p50_ms"));
}

#[test]
fn children_that_keep_failing_to_start_put_the_target_down() {
    // The first child (the connect's) serves; every later one exits at once with code 7.
    let dir = scratch("start_fails");
    let flag = dir.join("first-started");
    let serve = line(&serve_cmd(&["--stdio"]));
    let script = format!(
        "if [ -e {f} ]; then echo 'no licence' >&2; exit 7; fi; touch {f}; exec {serve}",
        f = flag.display()
    );
    let stdio = line(&["sh".into(), "-c".into(), script]);
    let out = dir.join("run").display().to_string();
    let o = run(&[
        "--stdio",
        &stdio,
        "--process-per-user",
        "-c",
        "3",
        "-d",
        "3s",
        "--warmup",
        "0s",
        "--out",
        &out,
    ]);
    let dir = dir.join("run");
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert!(
        row["target_down"].contains("did not start"),
        "{row:?} {o:?}"
    );
    let p = &summary(&dir)["processes"];
    assert!(p["start_failures"].as_u64().unwrap() >= 3, "{p}");
    let first = &p["exits"][0];
    assert_eq!(first["during"], "start");
    assert_eq!(first["code"], 7);
    assert_eq!(first["stderr_tail"][0], "no licence");
}

#[test]
fn the_memory_budget_ends_the_sweep_before_the_kernel_would() {
    // Each child holds 48 MiB of ballast beside what the binary needs: 200 MiB hold two of
    // them, three at the most.
    let budget: f64 = 200.0 * 1048576.0;
    let (dir, _) = fleet_run(
        "budget",
        &["--stdio", "--rss-ballast-mb", "48"],
        &[
            "-c",
            "2,8,16",
            "-d",
            "3s",
            "--warmup",
            "0s",
            "--fleet-memory-budget",
            "200MiB",
            "--tool",
            "echo",
        ],
        |_| {},
    );
    let rows = steps(&dir);
    assert_eq!(rows.len(), 2, "the sweep ends at the step past the budget");
    assert_eq!(rows[0]["verdict"], "ok", "{:?}", rows[0]);
    assert!(
        rows[1]["transport_error"].contains("memory budget"),
        "{:?}",
        rows[1]
    );
    // The fleet never held more than the budget (children are counted before they start).
    for r in &rows {
        assert!(num(r, "processes_max") <= 3.0, "{r:?}");
        assert!(num(r, "server_rss_max_bytes") <= budget, "{r:?}");
    }
    let s = summary(&dir);
    assert!(s["processes"]["budget_refusals"].as_u64().unwrap() > 0);
    let f = &s["fleet"];
    assert_eq!(f["largest_healthy"], 2, "{f}");
    assert_eq!(f["ran_out"], "memory", "{f}");
    assert_eq!(f["ran_out_step"], 2);
    assert!(
        f["rss_per_child_bytes"].as_f64().unwrap() >= 48.0 * 1048576.0,
        "{f}"
    );
}

#[test]
fn a_session_duration_churns_children_and_the_child_flags_reach_each_one() {
    // Every child says where it runs and one variable of its environment, then serves.
    let dir = scratch("session_duration");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let serve = line(&serve_cmd(&["--stdio"]));
    let script = format!("echo \"cwd=$(pwd) flavour=$FLAVOUR\" >&2; exec {serve}");
    let command = ["sh".to_owned(), "-c".to_owned(), script];
    let cwd = home.display().to_string();
    let (dir, _) = fleet_of(
        "session_duration_run",
        &command,
        &[
            "-c",
            "2",
            "-d",
            "3s",
            "--warmup",
            "0s",
            "--session-duration",
            "500ms",
            "--child-cwd",
            &cwd,
            "--child-env",
            "FLAVOUR=a=b c",
        ],
        |_| {},
    );
    let row = &steps(&dir)[0];
    assert_identity(row);
    assert_eq!(num(row, "requests"), num(row, "ok"), "{row:?}");
    let started = summary(&dir)["processes"]["started"].as_u64().unwrap();
    // 3 s of sessions of 0.5 s for 2 users: a dozen children; at least a few on a slow
    // machine, never one per user only.
    assert!(started >= 4, "{started} children");
    let said = format!(
        "cwd={} flavour=a=b c",
        home.canonicalize().unwrap().display()
    );
    let first = std::fs::read_to_string(dir.join("target-stderr.log")).unwrap();
    assert!(first.contains(&said), "{first}");
    let later = std::fs::read_to_string(dir.join("children/user-1.log")).unwrap();
    assert!(later.lines().filter(|l| *l == said).count() >= 2, "{later}");
    // The value is the child's, never the results'.
    let settings = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(!settings.contains("a=b c"), "the value was written");
}
