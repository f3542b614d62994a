//! The generator watches itself: a run starved of CPU (pinned with `taskset` to one core
//! beside a busy loop pinned there too, the target on another core) marks every step
//! `generator_bound` with its reason, in steps.csv, summary.json and the terminal; a run
//! against a slow target on a machine it has to itself marks none. Closed and open loops,
//! over HTTP and stdio.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{serve_cmd, start_http};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a run may take in all.
const BUDGET: Duration = Duration::from_secs(90);

/// The CPUs this process may run on (`Cpus_allowed_list`), in order.
fn allowed_cpus() -> Vec<u32> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/self/status")
        .trim();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// The core the generator is starved on, and one for the target (the same on a one-core
/// machine).
fn cores() -> (String, String) {
    let cpus = allowed_cpus();
    let starved = cpus[0];
    let other = cpus.get(1).copied().unwrap_or(starved);
    (starved.to_string(), other.to_string())
}

/// A busy loop pinned to `core`, for at most two minutes; its process group (`timeout` and
/// the shell it runs) is killed when dropped.
struct Spinner(Child);

impl Spinner {
    fn on(core: &str) -> Self {
        let child = Command::new("taskset")
            .args([
                "-c",
                core,
                "timeout",
                "120",
                "sh",
                "-c",
                "while :; do :; done",
            ])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("taskset (util-linux) starts a busy loop");
        Spinner(child)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

/// `mcpload run ARGS --out DIR`, pinned to `core` when given; asserts it exited 0 and
/// returns its stdout (the terminal report).
fn run_pinned(core: Option<&str>, args: &[&str], out_dir: &Path) -> String {
    let mut c = match core {
        Some(core) => {
            let mut c = Command::new("taskset");
            c.args(["-c", core, env!("CARGO_BIN_EXE_mcpload")]);
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_mcpload")),
    };
    c.arg("run").args(args).arg("--out").arg(out_dir);
    let watched = watch(c, BUDGET);
    let stdout = String::from_utf8_lossy(&watched.output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&watched.output.stderr);
    assert!(!watched.overran, "the run overran {BUDGET:?}\n{stderr}");
    assert_eq!(watched.output.status.code(), Some(0), "{stdout}\n{stderr}");
    stdout
}

/// Every step of the run in `out_dir` is generator-bound with a reason, in steps.csv and
/// summary.json, and the terminal says the generator limited it.
fn assert_every_step_bound(out_dir: &Path, terminal: &str) {
    let rows = steps(out_dir);
    assert!(!rows.is_empty());
    let record = summary(out_dir);
    for (row, step) in rows.iter().zip(record["steps"].as_array().unwrap()) {
        assert_eq!(row["generator_bound"], "true", "{row:?}");
        assert!(!row["generator_bound_reason"].is_empty(), "{row:?}");
        assert_eq!(step["generator_bound"], true);
        assert_eq!(
            step["generator_bound_reason"].as_str(),
            Some(row["generator_bound_reason"].as_str())
        );
        let cpu = num(row, "generator_cpu_pct");
        assert!(cpu > 0.0 && cpu <= 100.5, "generator_cpu_pct {cpu}");
        // A thread runs, waits for a core or sleeps: at most the whole wall time.
        let thread = num(row, "generator_load_thread_pct");
        assert!(
            thread > 0.0 && thread <= 101.0,
            "generator_load_thread_pct {thread}"
        );
        let line = format!(
            "the generator, not the server, limited step {}",
            row["step"]
        );
        assert!(terminal.contains(&line), "{line:?} not in\n{terminal}");
    }
    assert!(
        terminal.contains("split the load with --segment"),
        "{terminal}"
    );
    // An open loop that sends each arrival at its own instant is also told of the window
    // (a closed loop has no schedule to bunch), in the terminal and in report.html.
    let open = record["settings"]["load"]["model"] == "open";
    assert_eq!(terminal.contains("--send-window 1ms"), open, "{terminal}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert_eq!(html.contains("--send-window 1ms"), open);
}

/// Runs `load` over HTTP starved of CPU, asserts every step is marked, and returns the run
/// folder.
fn starved_over_http(load: &[&str], name: &str) -> PathBuf {
    let _share = machine::loading();
    let (starved, other) = cores();
    let mut cmd = vec!["taskset".to_owned(), "-c".to_owned(), other];
    cmd.extend(serve_cmd(&[]));
    let target = start_http(&cmd);
    let _spinner = Spinner::on(&starved);
    let out_dir = scratch(name).join("run");
    let mut args = vec!["--url", target.url.as_str(), "--tool", "echo"];
    args.extend_from_slice(load);
    args.extend_from_slice(&["--duration", "2s", "--warmup", "0s", "--keep-going"]);
    let terminal = run_pinned(Some(&starved), &args, &out_dir);
    assert_every_step_bound(&out_dir, &terminal);
    out_dir
}

/// An open loop past what half a core sends on time: its sends leave late.
#[test]
fn a_starved_open_loop_over_http_is_marked_generator_bound() {
    let out_dir = starved_over_http(&["--rate", "4000"], "generator-starved-open-http");
    let row = &steps(&out_dir)[0];
    // Late sends are judged against a tenth of the step's p50, which a starved loop's own
    // backlog can raise past every lag (seen on a loaded runner): the mark then comes from
    // its CPU demand, and only the lag figures' order is certain.
    assert!(num(row, "schedule_lag_max_ms") >= num(row, "schedule_lag_p99_ms"));
    assert!(num(row, "schedule_lag_p99_ms") >= num(row, "schedule_lag_p50_ms"));
}

/// A closed loop against a fast target: it wants its core all the time and gets half.
#[test]
fn a_starved_closed_loop_over_http_is_marked_generator_bound() {
    starved_over_http(&["-c", "32"], "generator-starved-closed-http");
}

/// Over stdio the child runs on the other core (its command pins it), the generator on the
/// starved one: both loops are marked.
#[test]
fn a_starved_generator_over_stdio_is_marked_generator_bound() {
    let _share = machine::loading();
    let (starved, other) = cores();
    let mut child = vec!["taskset".to_owned(), "-c".to_owned(), other];
    child.extend(serve_cmd(&["--stdio"]));
    let stdio = shell_words::join(&child);
    let _spinner = Spinner::on(&starved);
    for (load, name) in [
        (["-c", "32"], "generator-starved-closed-stdio"),
        (["--rate", "4000"], "generator-starved-open-stdio"),
    ] {
        let out_dir = scratch(name).join("run");
        let mut args = vec!["--stdio", stdio.as_str(), "--tool", "echo"];
        args.extend_from_slice(&load);
        args.extend_from_slice(&["--duration", "2s", "--warmup", "0s", "--keep-going"]);
        let terminal = run_pinned(Some(&starved), &args, &out_dir);
        assert_every_step_bound(&out_dir, &terminal);
    }
}

/// A target at 500 ms a call, and no other test beside: the server is the bottleneck, and no
/// step of either loop is marked. So slow a target gives an allowance of 50 ms: a machine
/// busy with other work (a CI runner's neighbours) delays a sleeping process's wakes by a
/// scheduler slice or two, far less.
#[test]
fn a_slow_target_is_the_bottleneck_not_the_generator() {
    let _share = machine::measuring();
    let target = start_http(&serve_cmd(&["--service-ms", "500"]));
    for (load, name) in [
        (["-c", "8"], "generator-slow-closed"),
        (["--rate", "16"], "generator-slow-open"),
    ] {
        let out_dir = scratch(name).join("run");
        let mut args = vec!["--url", target.url.as_str(), "--tool", "echo"];
        args.extend_from_slice(&load);
        args.extend_from_slice(&["--duration", "2s", "--warmup", "0s"]);
        let terminal = run_pinned(None, &args, &out_dir);
        for row in steps(&out_dir) {
            assert_eq!(row["generator_bound"], "false", "{name}: {row:?}");
            assert_eq!(row["generator_bound_reason"], "", "{name}");
            assert!(num(&row, "generator_cpu_pct") < 90.0, "{name}: {row:?}");
            // 16 calls a second: the worker's thread sleeps nearly all the time.
            let thread = num(&row, "generator_load_thread_pct");
            assert!(thread > 0.0 && thread < 90.0, "{name}: {row:?}");
            assert!(num(&row, "loop_delay_p99_ms") < 50.0, "{name}: {row:?}");
        }
        assert!(
            !terminal.contains("the generator, not the server"),
            "{terminal}"
        );
    }
}

/// A send window of 4 ms at 1,000 arrivals a second (1 ms apart) on one worker, against a
/// target at 20 ms a call: each timer wake sends the four arrivals due within 4 ms of the
/// first, so three in four leave early, on time by the lag; and an early request's latency
/// runs from its departure, so it is never shorter than its service time (from its write).
/// Timed from its later schedule, those three would measure 1 to 3 ms less than their
/// service, and the median latency would fall below the median service time. Every arrival
/// is still sent and answered.
#[test]
fn a_send_window_sends_arrivals_ahead_without_shortening_their_latency() {
    let _share = machine::measuring();
    let target = start_http(&serve_cmd(&["--service-ms", "20"]));
    let out_dir = scratch("generator-send-window").join("run");
    let args = [
        "--url",
        target.url.as_str(),
        "--tool",
        "echo",
        "--rate",
        "1000",
        "--send-window",
        "4ms",
        "--workers",
        "1",
        "--duration",
        "2s",
        "--warmup",
        "0s",
    ];
    run_pinned(None, &args, &out_dir);
    let row = &steps(&out_dir)[0];
    // On time is recorded as the histogram's least value, 1 µs; a timer's wake is later.
    assert!(num(row, "schedule_lag_p50_ms") <= 0.001, "{row:?}");
    // Each request's latency is at least its service time, so every quantile is too.
    for q in ["p50", "p90", "p99"] {
        let (latency, service) = (format!("{q}_ms"), format!("service_{q}_ms"));
        assert!(num(row, &latency) >= num(row, &service), "{q}: {row:?}");
    }
    assert!(num(row, "requests") >= 1990.0, "{row:?}");
    assert_eq!(row["requests"], row["responses"], "{row:?}");
    assert_eq!(row["dropped_arrivals"], "0");
    assert_eq!(
        summary(&out_dir)["settings"]["load"]["send_window_s"].as_f64(),
        Some(0.004)
    );
}

/// A window longer than 5 ms would send bunches far from their schedule: a usage error that
/// says what would do.
#[test]
fn a_send_window_past_5ms_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
        .args(["run", "--builtin", "--rate", "100", "--send-window", "20ms"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--send-window 20ms is longer than 5ms"),
        "{stderr}"
    );
}
