//! `mcpload probe --isolation` (the binary) against the built-in target over stdio, whose
//! head-of-line blocking is known: with `--serial` a fast call waits for a slow one in
//! flight (`blocked`), without it the two run at once (`isolated`).

use crate::support::bin;
use crate::support::servers::{line, serve_cmd};
use serde_json::Value;

/// The slow call kept in flight: `sleep` for this long.
const SLOW_MS: u64 = 800;

/// `mcpload probe --isolation --tool echo` with `sleep {"ms": SLOW_MS}` as the slow call,
/// against `mcpload serve --stdio SERVE_ARGS`; returns what it printed.
fn probe_isolation(serve_args: &[&str], json: bool) -> String {
    let mut serve = vec!["--stdio"];
    serve.extend_from_slice(serve_args);
    let slow_args = format!(r#"{{"ms": {SLOW_MS}}}"#);
    let mut cmd = bin();
    cmd.args(["probe", "--isolation", "--tool", "echo"])
        .args(["--slow-tool", "sleep", "--slow-args", &slow_args])
        .args(["--stdio", &line(&serve_cmd(&serve))])
        .env("NO_COLOR", "1");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("running mcpload probe");
    assert!(
        out.status.success(),
        "mcpload probe --isolation failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn behind_a_serial_server_the_fast_tool_is_blocked() {
    let report: Value = serde_json::from_str(&probe_isolation(&["--serial"], true)).unwrap();
    assert_eq!(report["transport"], "stdio");
    assert_eq!(report["slow"]["tool"], "sleep", "{report:#}");
    // Lower bounds only: a busy machine makes calls later, never sooner.
    assert!(report["slow"]["alone_median_ms"].as_f64().unwrap() >= SLOW_MS as f64);
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{report:#}");
    let echo = &tools[0];
    assert_eq!(echo["tool"], "echo");
    assert_eq!(echo["verdict"], "blocked", "{echo:#}");
    assert!(echo["ratio"].as_f64().unwrap() >= 2.0, "{echo:#}");
    // It waited out the slow call's rest: all of it but the lead (100 ms at most).
    let beside = echo["beside_slow_median_ms"].as_f64().unwrap();
    assert!(beside >= (SLOW_MS - 200) as f64, "{echo:#}");
}

#[test]
fn beside_a_concurrent_server_the_fast_tool_is_isolated() {
    let table = probe_isolation(&[], false);
    let header = table.lines().position(|l| l.starts_with("tool "));
    let rows: Vec<&str> = table.lines().skip(header.expect(&table) + 1).collect();
    assert_eq!(rows.len(), 1, "{table}");
    let cells: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!((cells[0], cells[4]), ("echo", "isolated"), "{table}");
    // It did not wait for the slow call (the verdict's own rule). The ratio itself is no
    // bound: a sub-millisecond echo beside another call on a busy machine can take a few
    // times as long without waiting for anything.
    let (alone, beside): (f64, f64) = (cells[1].parse().unwrap(), cells[2].parse().unwrap());
    assert!(beside - alone < (SLOW_MS / 4) as f64, "{table}");
    assert!(
        table.contains("slow call     sleep {\"ms\":800}"),
        "{table}"
    );
}
