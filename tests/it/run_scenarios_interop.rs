//! The shipped scenario profiles run for real, shortened by flags: profiles/fan-out.toml
//! against the built-in target, profiles/everything-scenario.toml against the TypeScript
//! "everything" server over Streamable HTTP and over stdio. Every step completes iterations
//! and fails none (steps.csv, scenarios.csv agreeing); fan-out's parallel members are sent
//! as pairs (ops.csv), and the everything profile's `expect` step runs and holds (the echo
//! carries the sum's text).

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

type Row = std::collections::HashMap<String, String>;

/// Runs shipped profile `name` with `flags`, shortened to two steps of 1 s (1 and 4 users),
/// into `<scratch>/run`; asserts that it succeeded and that every step completed iterations,
/// failed none (so no step failed), and accounted for each one it started, in steps.csv and
/// in its scenario's `*` row of scenarios.csv. Returns the run folder.
fn run_shortened(name: &str, scenario: &str, scratch_name: &str, flags: &[&str]) -> PathBuf {
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
        let whole = part(&out_dir, &r["step"], scenario, "*");
        for col in ["started", "completed", "failed", "interrupted"] {
            assert_eq!(
                num(&whole, col),
                num(r, &format!("iterations_{col}")),
                "{name}, step {}: scenarios.csv's `*` row and steps.csv",
                r["step"]
            );
        }
    }
    out_dir
}

/// The scenarios.csv row of `step`, `scenario` and `part` (`*` or a scenario step's name).
fn part(dir: &Path, step: &str, scenario: &str, part: &str) -> Row {
    table(dir, "scenarios.csv")
        .into_iter()
        .find(|r| r["step"] == step && r["scenario"] == scenario && r["part"] == part)
        .unwrap_or_else(|| panic!("no scenarios.csv row for step {step}, {scenario}/{part}"))
}

/// The everything profile's `check` step ran in every completed iteration and never failed.
fn assert_the_echo_held(dir: &Path) {
    for r in steps(dir) {
        let check = part(dir, &r["step"], "sum-echo", "check");
        assert_eq!(
            num(&check, "completed"),
            num(&r, "iterations_completed"),
            "{check:?}"
        );
        assert_eq!(num(&check, "failed"), 0.0, "{check:?}");
        assert_eq!(num(&check, "assertion_failures"), 0.0, "{check:?}");
        assert_eq!(check["failure_reasons"], "", "{check:?}");
    }
}

#[test]
fn fan_out_joins_a_tool_call_and_a_resource_read_without_a_failed_iteration() {
    let _share = machine::loading();
    let dir = run_shortened("fan-out", "fan-out", "scenario-fan-out", &[]);
    // Both members go out together in every iteration, so they were sent as often as each
    // other, and every one was answered well.
    let ops = table(&dir, "ops.csv");
    for r in steps(&dir) {
        let member = |op: &str| {
            ops.iter()
                .find(|o| o["step"] == r["step"] && o["op"] == op)
                .unwrap_or_else(|| panic!("no ops.csv row for {op} in step {}", r["step"]))
        };
        let (sleep, item) = (member("fan-out/both/sleep"), member("fan-out/both/item"));
        assert!(num(sleep, "requests") > 0.0, "{sleep:?}");
        assert_eq!(
            num(sleep, "requests"),
            num(item, "requests"),
            "step {}",
            r["step"]
        );
        for m in [sleep, item] {
            assert_eq!(num(m, "ok"), num(m, "requests"), "{m:?}");
        }
    }
}

#[test]
fn everything_scenario_echoes_the_sum_over_http() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    let dir = run_shortened(
        "everything-scenario",
        "sum-echo",
        "scenario-everything-http",
        &["--url", &server.url],
    );
    assert_the_echo_held(&dir);
}

#[test]
fn everything_scenario_echoes_the_sum_over_stdio() {
    let _share = machine::loading();
    let cmd = line(&everything_cmd("stdio"));
    let dir = run_shortened(
        "everything-scenario",
        "sum-echo",
        "scenario-everything-stdio",
        &["--stdio", &cmd],
    );
    assert_the_echo_held(&dir);
}
