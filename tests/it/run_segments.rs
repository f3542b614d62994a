//! Execution segments against one external `mcpload serve`: four `mcpload run --segment I/4`
//! processes add up to the whole (the target's own counts say so), an open-loop rate split
//! four ways is the whole schedule, `--start-at` lines every segment's steps up, a segment
//! runs every step even past a failure, and bad segment values are usage errors.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{Server, serve, target_stats};
use crate::support::{bin, mcpload};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime};

/// Starts `mcpload run --quiet --url URL ARGS --segment I/N --out DIR` as a child.
fn segment(url: &str, args: &[&str], seg: &str, out: &Path) -> Child {
    bin()
        .args(["run", "--quiet", "--url", url, "--segment", seg, "--out"])
        .arg(out)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a segment and checks it exited 0.
fn finish(child: Child) {
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs segments 1..=4 of 4 at once (each its own process) and returns their folders.
fn four_segments(dir: &Path, server: &Server, args: &[&str]) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = (1..=4).map(|i| dir.join(format!("seg{i}"))).collect();
    let children: Vec<Child> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| segment(&server.url, args, &format!("{}/4", i + 1), d))
        .collect();
    children.into_iter().for_each(finish);
    dirs
}

/// The echo calls the target answered (the mix's; the handshakes are other methods).
fn echo_requests(server: &Server) -> f64 {
    target_stats(&server.url)
        .pointer("/operations/echo/requests")
        .and_then(Value::as_f64)
        .expect("the target counts echo calls")
}

/// A common start at least `ahead` from now, on a whole second (as a launcher would write
/// it).
fn start_in(ahead: Duration) -> (SystemTime, String) {
    let at = SystemTime::now() + ahead;
    let secs = at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() + 1;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    (at, humantime::format_rfc3339_seconds(at).to_string())
}

fn unix_ms(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

#[test]
fn four_segments_of_a_closed_sweep_add_up_to_the_whole() {
    let _share = machine::loading();
    let dir = scratch("segments-closed");
    let server = serve(&[]);
    let (_, start) = start_in(Duration::from_secs(3));
    // No warm-up: every echo call the target saw was a measured one.
    let args = [
        "-c",
        "1,2,4,8",
        "-d",
        "1s",
        "--warmup",
        "0s",
        "--timeout",
        "1s",
        "--start-at",
        &start,
    ];
    let dirs = four_segments(&dir, &server, &args);
    // 1, 2, 4, 8 over four: floor(c/4), one more for the first c mod 4 segments. A share of
    // 0 runs its step's window idle and records an empty step.
    let want = [
        [1.0, 1.0, 1.0, 2.0],
        [0.0, 1.0, 1.0, 2.0],
        [0.0, 0.0, 1.0, 2.0],
        [0.0, 0.0, 1.0, 2.0],
    ];
    let mut requests = 0.0;
    let mut totals = [0.0; 4];
    for (d, want) in dirs.iter().zip(want) {
        let rows = steps(d);
        let shares: Vec<f64> = rows.iter().map(|r| num(r, "concurrency")).collect();
        assert_eq!(shares, want, "{}", d.display());
        for (r, total) in rows.iter().zip(&mut totals) {
            assert_identity(r);
            if num(r, "concurrency") == 0.0 {
                assert_eq!(num(r, "requests"), 0.0, "{r:?}");
            }
            *total += num(r, "concurrency");
            requests += num(r, "requests");
        }
        let s = summary(d);
        assert_eq!(s["status"], "complete");
        assert_eq!(s["segment"]["count"], 4);
        assert_eq!(s["segment"]["steps"].as_array().unwrap().len(), 4);
    }
    assert_eq!(
        totals,
        [1.0, 2.0, 4.0, 8.0],
        "the shares add up to every level"
    );
    assert!(requests > 0.0);
    assert_eq!(
        requests,
        echo_requests(&server),
        "the target's count is the sum"
    );
}

#[test]
fn an_open_loop_split_four_ways_is_the_whole_schedule() {
    let _share = machine::loading();
    let dir = scratch("segments-open");
    let server = serve(&[]);
    let (rate, secs) = (400.0, 2.0);
    let (_, start) = start_in(Duration::from_secs(3));
    let args = [
        "-r",
        "400",
        "-d",
        "2s",
        "--warmup",
        "0s",
        "--timeout",
        "1s",
        "--spacing",
        "constant",
        "--start-at",
        &start,
    ];
    let dirs = four_segments(&dir, &server, &args);
    let (mut requests, mut dropped) = (0.0, 0.0);
    for d in &dirs {
        let rows = steps(d);
        assert_eq!(num(&rows[0], "target_rate"), rate / 4.0);
        assert_identity(&rows[0]);
        requests += num(&rows[0], "requests");
        dropped += num(&rows[0], "dropped_arrivals");
        // A busy machine makes sends late; that is reported, not asserted.
        eprintln!(
            "{}: schedule lag p99 {} ms",
            d.display(),
            rows[0]["schedule_lag_p99_ms"]
        );
    }
    // Each segment sends its interleaved lane of the schedule over the common window, every
    // arrival due in it however late the sender woke: together, the whole schedule's
    // rate x duration arrivals, sent or dropped at max_in_flight, whatever the machine's load.
    assert_eq!(requests + dropped, rate * secs);
    let achieved = requests / secs;
    assert!(
        (achieved - rate).abs() <= 0.01 * rate,
        "{achieved} req/s over the common window against {rate}"
    );
    assert_eq!(requests, echo_requests(&server));
}

#[test]
fn segments_started_at_different_moments_line_their_steps_up() {
    let _share = machine::loading();
    let dir = scratch("segments-start-at");
    let server = serve(&[]);
    let (at, start) = start_in(Duration::from_secs(5));
    let args = [
        "-c",
        "2,4",
        "-d",
        "1s",
        "--warmup",
        "300ms",
        "--timeout",
        "1s",
        "--start-at",
        &start,
    ];
    let mut children = Vec::new();
    for i in 1..=4 {
        let out = dir.join(format!("seg{i}"));
        children.push((
            out.clone(),
            segment(&server.url, &args, &format!("{i}/4"), &out),
        ));
        std::thread::sleep(Duration::from_millis(400));
    }
    let dirs: Vec<PathBuf> = children
        .into_iter()
        .map(|(d, c)| {
            finish(c);
            d
        })
        .collect();
    // The slot: warm-up 0.3 s, its drain bound (the 1 s timeout) and 0.2 s of margin before
    // the measured second, then its drain bound and the margin again: 3.7 s.
    let (measure_offset, slot) = (1500.0, 3700.0);
    let mut starts = vec![Vec::new(); 2];
    for d in &dirs {
        let seg = &summary(d)["segment"];
        assert_eq!(seg["start_at"], Value::String(start.clone()), "{seg}");
        let late = seg["start_late_ms"]
            .as_f64()
            .expect("start_late_ms is recorded");
        assert!((0.0..slot).contains(&late), "{late}");
        for (k, w) in seg["steps"].as_array().unwrap().iter().enumerate() {
            assert_eq!(w["step"], k + 1);
            let (s, e) = (
                w["start_unix_ms"].as_f64().unwrap(),
                w["end_unix_ms"].as_f64().unwrap(),
            );
            assert!(e - s >= 1000.0, "{w}");
            starts[k].push(s);
        }
        // Seconds count from the common start: step 1's first second starts after the
        // warm-up and its drain bound.
        let t0 = num(&table(d, "timeseries.csv")[0], "t_s");
        assert!((t0 * 1000.0 - measure_offset).abs() < 50.0, "{t0}");
    }
    // The measured times start on instants computed from --start-at and the schedule alone
    // (each process reads its clocks once to place them), not on when a process woke: so
    // they agree far closer than a tenth of a step (100 ms) however busy the machine, unless
    // a warm-up drain overran its bound of a whole timeout. 50 ms leaves room for that
    // reading, not for scheduling.
    for (k, s) in starts.iter().enumerate() {
        let want = unix_ms(at) + measure_offset + k as f64 * slot;
        for x in s {
            assert!(
                (x - want).abs() < 50.0,
                "step {}: {s:?} against {want}",
                k + 1
            );
        }
    }
}

#[test]
fn a_segment_runs_every_step_past_a_failed_one() {
    let _share = machine::loading();
    let dir = scratch("segments-failure");
    // Every call answers a JSON-RPC error: each step fails at the default 1% error rate.
    let server = serve(&[]);
    let args = [
        "--tool",
        "fail",
        "--args",
        r#"{"code": -32000}"#,
        "-c",
        "1,2,3",
        "-d",
        "500ms",
        "--warmup",
        "0s",
        "--timeout",
        "1s",
    ];
    let whole = dir.join("whole");
    let out = bin()
        .args(["run", "--quiet", "--url", &server.url, "--out"])
        .arg(&whole)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        steps(&whole).len(),
        1,
        "a plain run stops at the failed step"
    );
    let part = dir.join("part");
    finish(segment(&server.url, &args, "1/2", &part));
    let rows = steps(&part);
    let verdicts: Vec<&str> = rows.iter().map(|r| r["verdict"].as_str()).collect();
    assert_eq!(verdicts, ["failed"; 3], "a segment runs the whole schedule");
    assert_eq!(summary(&part)["settings"]["load"]["stop_on_failure"], false);
}

#[test]
fn bad_segment_values_are_usage_errors_naming_their_source() {
    for (args, env, want) in [
        (
            vec!["--segment", "0/4"],
            None,
            "--segment 0/4: I must be from 1 to N",
        ),
        (
            vec!["--segment", "5/4"],
            None,
            "--segment 5/4: I must be from 1 to N",
        ),
        (
            vec!["--segment", "two"],
            None,
            "--segment two: not of the form I/N",
        ),
        (
            vec![],
            Some(("MCPLOAD_SEGMENT", "3/2")),
            "MCPLOAD_SEGMENT=3/2: I must be from 1 to N",
        ),
        (
            vec!["--segments", "4"],
            None,
            "--segments 4: which segment is this?",
        ),
        (
            vec!["--segments", "4"],
            Some(("JOB_COMPLETION_INDEX", "4")),
            "JOB_COMPLETION_INDEX=4: with --segments 4 it must be a whole number from 0 to 3",
        ),
        (
            vec!["--start-at", "soon"],
            None,
            "--start-at soon: not an RFC 3339 time",
        ),
    ] {
        let mut cmd = bin();
        cmd.args(["run", "--builtin", "-d", "1s"]).args(&args);
        cmd.env_remove("MCPLOAD_SEGMENT")
            .env_remove("MCPLOAD_SEGMENTS")
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("MCPLOAD_START_AT");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A start further back than one step's slot cannot line up with anything.
    let dir = scratch("segments-past");
    let out = mcpload(&[
        "run",
        "--builtin",
        "-d",
        "1s",
        "--start-at",
        "2020-01-01T00:00:00Z",
        "--out",
        dir.join("run").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("in the past, more than one step's slot"),
        "{err}"
    );
    assert!(!dir.join("run").join("summary.json").exists());
}

#[test]
fn a_segment_whose_stdio_target_dies_ends_there() {
    let _share = machine::loading();
    let dir = scratch("segments-target-down").join("run");
    let command = format!(
        "{} serve --stdio --hostile die-mid-line --hostile-every 7",
        env!("CARGO_BIN_EXE_mcpload")
    );
    let out = run(&[
        "--stdio",
        &command,
        "--protocol",
        "2025-03-26",
        "--segment",
        "1/2",
        "-c",
        "4,8",
        "-d",
        "10s",
        "--warmup",
        "0s",
        "--timeout",
        "1s",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    // Every segment runs the whole schedule past a failed step, but nothing more can be
    // measured against a target that is down.
    let rows = steps(&dir);
    assert_eq!(rows.len(), 1, "no step after the target died");
    assert_eq!(rows[0]["concurrency"], "2");
    assert!(!rows[0]["target_down"].is_empty(), "{:?}", rows[0]);
}
