//! Soak runs against misbehaviour known exactly: the built-in target leaking memory and
//! descriptors at a set rate per call (`--leak-bytes-per-call`, `--leak-fd-every`), or
//! slowing down by the minute (`--drift-ms-per-minute`), watched as a process (by
//! `--server-pid`, as a stdio child, in-process); each check fails with a rate within 20% of
//! the truth, and without a knob the same checks pass. Steady windows of 32 s judged with
//! `--leak-min-window 30s` (the 2-minute and 30-minute figures are in benches/README.md).
//!
//! The soaks of servers that leak nothing take the machine to themselves (`measuring`): they
//! assert that no check fails, latency_drift included, and a neighbouring load test that
//! started or ended halfway through their 32 s would be a real rise or fall of their latency,
//! the machine's and not the server's. A steady load beside them (a busy CI machine) leaves
//! no trend. The soaks of known misbehaviour keep a `loading` share: their rates are far from
//! what a neighbour can move.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{everything_cmd, line, python_cmd, serve_cmd, start_http};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// How long a soak run may take in all (32 s measured, warm-up, cool-down, the handshake).
const BUDGET: Duration = Duration::from_secs(120);

/// The load of every soak here: 40 calls a second for 32 s after 2 s of warm-up, then a
/// cool-down.
const LOAD: [&str; 12] = [
    "--rate",
    "40",
    "--duration",
    "32s",
    "--warmup",
    "2s",
    "--cooldown",
    "6s",
    "--leak-min-window",
    "30s",
    "--timeout",
    "5s",
];

/// Runs a soak with `args` added to [`LOAD`] (and a mix of `echo` unless `args` start with a
/// profile); returns the folder, exit code and stdout.
fn soak(name: &str, args: &[&str]) -> (std::path::PathBuf, Option<i32>, String) {
    let out_dir = scratch(name).join("run");
    let mut all: Vec<&str> = args.to_vec();
    if !args.first().is_some_and(|a| a.ends_with(".toml")) {
        all.extend_from_slice(&["--tool", "echo"]);
    }
    all.extend_from_slice(&LOAD);
    let out = out_dir.display().to_string();
    all.extend_from_slice(&["--out", &out]);
    let watched = run_watched(&all, BUDGET);
    let stdout = String::from_utf8_lossy(&watched.output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&watched.output.stderr);
    assert!(!watched.overran, "the soak overran {BUDGET:?}\n{stderr}");
    (
        out_dir,
        watched.output.status.code(),
        format!("{stdout}\n{stderr}"),
    )
}

/// The check `id` of the run in `dir`.
fn check(dir: &Path, id: &str) -> Value {
    let s = summary(dir);
    s["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == id).cloned())
        .unwrap_or_else(|| panic!("no check {id} in {}", s["checks"]))
}

/// The calls the step answered per minute.
fn calls_per_minute(dir: &Path) -> f64 {
    let row = &steps(dir)[0];
    num(row, "responses") / num(row, "duration_s") * 60.0
}

/// resources.csv has a row a second through the whole run, in every phase, and the server
/// columns of timeseries.csv and steps.csv are filled.
fn assert_watched(dir: &Path) {
    let rows = table(dir, "resources.csv");
    // 2 s of warm-up, 32 s measured, 6 s of cool-down: a sample a second, some lost to a
    // busy machine's late wakes.
    assert!(rows.len() >= 30, "{} samples", rows.len());
    for phase in ["warmup", "measure", "cooldown"] {
        assert!(
            rows.iter().any(|r| r["phase"] == phase),
            "no {phase} sample"
        );
    }
    assert!(rows.iter().all(|r| !r["rss_bytes"].is_empty()));
    // A second's row carries the sample taken within a second of it; on a busy machine the
    // sampler's thread may run late and leave a row's server cells empty (not known then),
    // so what is checked is that rows are filled, each with a sample of resources.csv.
    let ts = table(dir, "timeseries.csv");
    let sampled: std::collections::HashSet<&str> =
        rows.iter().map(|r| r["rss_bytes"].as_str()).collect();
    let filled: Vec<&str> = ts
        .iter()
        .map(|r| r["server_rss_bytes"].as_str())
        .filter(|v| !v.is_empty())
        .collect();
    assert!(!filled.is_empty(), "no second carries the server's figures");
    for v in &filled {
        assert!(sampled.contains(v), "{v} is no sample of resources.csv");
    }
    let step = &steps(dir)[0];
    assert!(num(step, "server_rss_max_bytes") > 1e6, "{step:?}");
    // report.html: a card per check, and the resources plot (also saved beside it).
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("The server&#39;s resources") || html.contains("The server's resources"));
    assert!(
        html.contains("class=\"check st-"),
        "no check cards in report.html"
    );
    let svg = std::fs::read_to_string(dir.join("resources.svg")).unwrap();
    assert!(
        svg.contains("RSS MiB") && svg.contains("<polyline"),
        "resources.svg draws no RSS"
    );
}

/// Memory and descriptors leaked at a known rate, the server a separate process watched by
/// `--server-pid`: both checks fail, each rate within 20% of the truth, and the run exits 1.
#[test]
fn a_server_that_leaks_memory_and_descriptors_fails_both_checks_at_their_rates() {
    let _share = machine::loading();
    let bytes_per_call = 16_384.0;
    let fd_every = 10.0;
    let target = start_http(&serve_cmd(&[
        "--leak-bytes-per-call",
        "16384",
        "--leak-fd-every",
        "10",
    ]));
    let pid = target.pid().to_string();
    let (dir, code, out) = soak("soak-leaks", &["--url", &target.url, "--server-pid", &pid]);
    assert_eq!(code, Some(1), "{out}");
    assert_watched(&dir);
    let per_min = calls_per_minute(&dir);
    let memory = check(&dir, "memory_leak");
    assert_eq!(memory["status"], "fail", "{memory}");
    assert_eq!(memory["unit"], "MiB/min");
    let truth = bytes_per_call * per_min / (1u64 << 20) as f64;
    let slope = memory["value"].as_f64().unwrap();
    assert!(
        (slope - truth).abs() <= 0.2 * truth,
        "memory_leak {slope} MiB/min, truth {truth}"
    );
    let per_1k = memory["kib_per_1k_requests"].as_f64().unwrap();
    assert!(
        (per_1k - 16.0 * 1000.0).abs() <= 0.2 * 16_000.0,
        "{per_1k} KiB per 1,000 requests"
    );
    let fds = check(&dir, "fd_leak");
    assert_eq!(fds["status"], "fail", "{fds}");
    let truth = per_min / fd_every;
    let slope = fds["value"].as_f64().unwrap();
    assert!(
        (slope - truth).abs() <= 0.2 * truth,
        "fd_leak {slope}/min, truth {truth}"
    );
    assert!(out.contains("memory_leak"), "{out}");
}

/// The same load on a stdio child that leaks nothing, watched with no flag: the leak checks
/// pass, nothing fails, the run exits 0.
#[test]
fn a_stdio_child_that_leaks_nothing_passes_the_leak_checks() {
    let _share = machine::measuring();
    let child = line(&serve_cmd(&["--stdio"]));
    let (dir, code, out) = soak("soak-clean-stdio", &["--stdio", &child]);
    assert_eq!(code, Some(0), "{out}");
    assert_watched(&dir);
    for id in ["fd_leak", "thread_leak"] {
        let c = check(&dir, id);
        assert_eq!(c["status"], "pass", "{c}");
    }
    for c in summary(&dir)["checks"].as_array().unwrap() {
        assert_ne!(c["status"], "fail", "{c}");
        assert!(!c["reason"].as_str().unwrap().is_empty(), "{c}");
    }
}

/// The built-in target in this process, each call 600 ms a minute slower: latency_drift
/// fails at the rate set (within 20%), a gate on it fails with it, and the descriptors and
/// sessions the target does not leak pass.
#[test]
fn a_target_that_slows_by_the_minute_fails_latency_drift_and_its_gate() {
    let _share = machine::loading();
    let mix = profile(
        &scratch("soak-drift-profile"),
        "two-ops",
        "[target.builtin]\ndrift_ms_per_minute = 600\n\n[[mix]]\nmethod = \"tools/call\"\ntool = \"echo\"\nargs = { message = \"hi\" }\n\n\
         [[mix]]\nmethod = \"tools/list\"\n",
    );
    let mix = mix.display().to_string();
    let (dir, code, out) = soak(
        "soak-drift",
        &[&mix, "--threshold", "check{id=latency_drift}!=fail"],
    );
    // On a machine busy enough that mcpload itself fell behind (generator_bound), the drift is
    // only a warning, said so, and the gate on it holds: part of the latency is mcpload's.
    let bound = steps(&dir)[0]["generator_bound"] == "true";
    let (status, exit) = if bound { ("warn", 0) } else { ("fail", 1) };
    assert_eq!(code, Some(exit), "{out}");
    let drift = check(&dir, "latency_drift");
    assert_eq!(drift["status"], status, "{drift}");
    // 600 ms a minute: the p99 of each window follows the service time up (a busy machine
    // adds about as much to every window, which leaves the slope).
    let slope = drift["value"].as_f64().unwrap();
    assert!((480.0..=720.0).contains(&slope), "{drift}");
    let gate = &summary(&dir)["gates"][0];
    assert_eq!(gate["holds"], bound, "{gate}");
    assert_eq!(gate["threshold"], "check{id=latency_drift}!=fail");
    assert_ne!(check(&dir, "fd_leak")["status"], "fail");
    // The built-in target says the sessions it holds: none under 2026-07-28, as many as
    // mcpload holds, so no excess grows.
    let sessions = check(&dir, "session_leak");
    assert_eq!(sessions["status"], "pass", "{sessions}");
    // Each operation's own drift: both slow down alike.
    let checks = summary(&dir)["checks"].as_array().unwrap().clone();
    for op in ["echo", "tools/list"] {
        let c = checks
            .iter()
            .find(|c| c["id"] == "latency_drift" && c["op"] == op)
            .unwrap_or_else(|| panic!("no latency_drift of {op}"));
        assert_eq!(c["status"], status, "{c}");
    }
    if !bound {
        assert!(out.contains("latency_drift{op=echo}"), "{out}");
    }
}

/// A check's gate that names no check, or compares with a number, is a usage error that
/// says what would do.
#[test]
fn a_bad_check_gate_is_refused_with_what_would_do() {
    for (gate, says) in [
        ("check{id=memory_leak}<fail", "only with == and !="),
        ("check{id=memory_leak}!=broken", "pass, warn, fail, skipped"),
        ("check!=fail", "check{id=NAME}"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
            .args(["run", "--builtin", "--threshold", gate])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{gate}: {stderr}");
        assert!(stderr.contains(says), "{gate}: {stderr}");
    }
}

/// Every check of a third-party server that leaks nothing, by what a soak of it found: none
/// fails, each says why it passed or was skipped.
fn assert_nothing_fails(dir: &Path) {
    for c in summary(dir)["checks"].as_array().unwrap() {
        assert_ne!(c["status"], "fail", "{c}");
        assert!(!c["reason"].as_str().unwrap().is_empty(), "{c}");
    }
}

/// The Python SDK's server over HTTP, watched by `--server-pid`: its interpreter's memory,
/// descriptors and threads are watched, and no check fails.
#[test]
fn the_python_sdk_server_watched_by_pid_fails_no_check() {
    let _share = machine::measuring();
    let target = start_http(&python_cmd(&["http"]));
    let pid = target.pid().to_string();
    let (dir, code, out) = soak("soak-python", &["--url", &target.url, "--server-pid", &pid]);
    assert_eq!(code, Some(0), "{out}");
    assert_watched(&dir);
    assert_nothing_fails(&dir);
}

/// The TypeScript everything server as a stdio child, watched with no flag: its memory,
/// descriptors and threads are followed, and no check but `memory_leak` fails. A Node
/// server's heap grows through its first minutes under load (about 18 MiB/min over these
/// 32 s), so `memory_leak` may find that growth significant in so short a window: a verdict
/// on the server, not a false reading, so it is left to it (the leak checks' rates are tested
/// against the built-in target's known leaks above); the exit code follows it.
#[test]
fn the_everything_server_as_a_stdio_child_fails_no_check_but_its_heap_growth() {
    let _share = machine::measuring();
    let child = line(&everything_cmd("stdio"));
    let args = ["--stdio", &child, "--args", r#"{"message":"soak"}"#];
    let (dir, code, out) = soak("soak-everything", &args);
    assert_watched(&dir);
    let mut memory_failed = false;
    for c in summary(&dir)["checks"].as_array().unwrap() {
        if c["id"] == "memory_leak" {
            assert!(c["value"].is_number(), "judged: {c}");
            memory_failed = c["status"] == "fail";
        } else {
            assert_ne!(c["status"], "fail", "{c}");
        }
    }
    assert_eq!(code, Some(i32::from(memory_failed)), "{out}");
}

/// A container's cgroup, as a directory of cgroup v2 files this test writes (these machines
/// mount v1): its memory grows by 1 MiB each half second while the load runs, so
/// memory_leak fails at 120 MiB/min within 20%, the cgroup's figures winning over the
/// in-process target's own.
#[test]
fn a_cgroup_whose_memory_grows_fails_memory_leak_at_its_rate() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let _share = machine::loading();
    let cgroup = scratch("soak-cgroup-files");
    /// Written whole and renamed: a reader never sees half a number.
    fn write(dir: &Path, mib: u64) {
        let tmp = dir.join("memory.current.tmp");
        std::fs::write(&tmp, format!("{}\n", mib << 20)).unwrap();
        std::fs::rename(&tmp, dir.join("memory.current")).unwrap();
    }
    write(&cgroup, 100);
    std::fs::write(cgroup.join("memory.stat"), "anon 0\ninactive_file 0\n").unwrap();
    std::fs::write(cgroup.join("cpu.stat"), "usage_usec 1000\n").unwrap();
    std::fs::write(cgroup.join("pids.current"), "3\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let grower = {
        let stop = Arc::clone(&stop);
        let dir = cgroup.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            // At most the run's budget; 1 MiB each half second, from the start.
            while !stop.load(Ordering::Relaxed) && start.elapsed() < BUDGET {
                std::thread::sleep(Duration::from_millis(500));
                write(&dir, 100 + (start.elapsed().as_millis() / 500) as u64);
            }
        })
    };
    let path = cgroup.display().to_string();
    let (dir, code, out) = soak("soak-cgroup", &["--builtin", "--server-cgroup", &path]);
    stop.store(true, Ordering::Relaxed);
    grower.join().unwrap();
    assert_eq!(code, Some(1), "{out}");
    let memory = check(&dir, "memory_leak");
    assert_eq!(memory["status"], "fail", "{memory}");
    let slope = memory["value"].as_f64().unwrap();
    assert!(
        (96.0..=144.0).contains(&slope),
        "memory_leak {slope} MiB/min, truth 120"
    );
}

/// A server's own Prometheus page (`--server-metrics`), served as a file by Python's
/// http.server and rewritten each half second: its resident memory grows 1 MiB and its
/// sessions gauge (`--server-metric sessions=…`) one session a second, so memory_leak fails
/// at 120 MiB/min and session_leak at 120 sessions/min, each within 20%.
#[test]
fn a_prometheus_page_whose_memory_and_sessions_grow_fails_both_checks() {
    use std::io::{BufRead, BufReader};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let _share = machine::loading();
    let site = scratch("soak-metrics-site");
    /// The page at `k` half seconds, written whole and renamed.
    fn page(dir: &Path, k: u64) {
        let text = format!(
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n\
             # TYPE process_resident_memory_bytes gauge\n\
             process_resident_memory_bytes {}\n\
             # TYPE process_open_fds gauge\nprocess_open_fds 12\n\
             # TYPE mcp_sessions_active gauge\nmcp_sessions_active{{transport=\"http\"}} {}\n",
            (100 + k) << 20,
            k
        );
        std::fs::write(dir.join("metrics.tmp"), text).unwrap();
        std::fs::rename(dir.join("metrics.tmp"), dir.join("metrics")).unwrap();
    }
    page(&site, 0);
    let mut server = std::process::Command::new("python3")
        .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
        .current_dir(&site)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 -m http.server");
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
    let port = first
        .split(" port ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no port in {first:?}"))
        .to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, dir) = (Arc::clone(&stop), site.clone());
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) && start.elapsed() < BUDGET {
                std::thread::sleep(Duration::from_millis(500));
                page(&dir, (start.elapsed().as_millis() / 500) as u64);
            }
        })
    };
    let url = format!("http://127.0.0.1:{port}/metrics");
    let (dir, code, out) = soak(
        "soak-metrics",
        &[
            "--builtin",
            "--server-metrics",
            &url,
            "--server-metric",
            "sessions=mcp_sessions_active",
        ],
    );
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, Some(1), "{out}");
    for (id, truth) in [("memory_leak", 120.0), ("session_leak", 120.0)] {
        let c = check(&dir, id);
        assert_eq!(c["status"], "fail", "{c}");
        let slope = c["value"].as_f64().unwrap();
        assert!(
            (slope - truth).abs() <= 0.2 * truth,
            "{id} {slope}, truth {truth}"
        );
    }
    let rows = table(&dir, "resources.csv");
    assert!(
        rows.iter().any(|r| !r["sessions"].is_empty()),
        "no sessions column filled"
    );
}
