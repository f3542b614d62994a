//! The shipped scenario profiles run for real, shortened by flags: profiles/fan-out.toml
//! against the built-in target, profiles/everything-scenario.toml against the TypeScript
//! "everything" server over Streamable HTTP and over stdio. Every step completes iterations
//! and fails none; the everything profile's iterations complete only when their `expect`
//! step holds (the echo carries the sum's text).

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{everything_cmd, line, start_http};
use std::path::{Path, PathBuf};

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("profiles")
        .join(format!("{name}.toml"))
}

/// Runs shipped profile `name` with `flags`, shortened to two steps of 1 s (1 and 4 users),
/// into `<scratch>/run`; asserts that it succeeded and that every step completed iterations,
/// failed none (so no step failed), and accounted for each one it started. Returns steps.csv.
fn run_shortened(
    name: &str,
    scratch_name: &str,
    flags: &[&str],
) -> Vec<std::collections::HashMap<String, String>> {
    let out_dir = scratch(scratch_name).join("run");
    let profile = shipped(name);
    let mut args = vec![
        profile.to_str().unwrap(),
        "--concurrency",
        "1,4",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{name}");
    let rows = steps(&out_dir);
    let levels: Vec<f64> = rows.iter().map(|r| num(r, "concurrency")).collect();
    assert_eq!(levels, [1.0, 4.0], "{name}");
    for r in &rows {
        assert_identity(r);
        let started = num(r, "iterations_started");
        let completed = num(r, "iterations_completed");
        let failed = num(r, "iterations_failed");
        assert!(completed > 0.0, "{name}, step {}: {r:?}", r["step"]);
        assert_eq!(failed, 0.0, "{name}, step {}: {r:?}", r["step"]);
        assert_eq!(
            started,
            completed + failed + num(r, "iterations_interrupted"),
            "{name}, step {}: every iteration started ends one way",
            r["step"]
        );
        assert_ne!(r["verdict"], "failed", "{name}, step {}: {r:?}", r["step"]);
    }
    rows
}

#[test]
fn fan_out_joins_a_tool_call_and_a_resource_read_without_a_failed_iteration() {
    let _share = machine::loading();
    run_shortened("fan-out", "scenario-fan-out", &[]);
}

#[test]
fn everything_scenario_echoes_the_sum_over_http() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    run_shortened(
        "everything-scenario",
        "scenario-everything-http",
        &["--url", &server.url],
    );
}

#[test]
fn everything_scenario_echoes_the_sum_over_stdio() {
    let _share = machine::loading();
    let cmd = line(&everything_cmd("stdio"));
    run_shortened(
        "everything-scenario",
        "scenario-everything-stdio",
        &["--stdio", &cmd],
    );
}
