//! Race checks under load, as scenarios: `parallel` members sent in `copies`, captures that
//! collect lists, and `tally` steps counting lost updates, double effects and stale reads.
//! profiles/races.toml runs against the built-in target's race bugs: every steps.csv count,
//! summed, equals the target's own ground truth (target-stats.json), exactly; the findings
//! carry their evidence to summary.json, the terminal and report.html; the gates
//! `lost_updates==0` and `double_effects==0` fail the run. With the bugs off, every count is
//! 0 and the gates pass.

use crate::support::bin;
use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use serde_json::Value;
use std::path::{Path, PathBuf};

const SHIPPED: &str = include_str!("../../profiles/races.toml");

/// Runs `text` as a profile with `extra` flags (warm-up off, so that the target's counters
/// cover the measured steps alone); the folder and the output.
fn run_races(name: &str, text: &str, extra: &[&str]) -> (PathBuf, std::process::Output) {
    let dir = scratch(name);
    let p = profile(&dir, name, text);
    let out_dir = dir.join("run");
    let mut args = vec![
        p.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--warmup",
        "0s",
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    (out_dir, out)
}

fn target_stats(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("target-stats.json")).unwrap()).unwrap()
}

/// A count column of steps.csv summed over the steps (each step must have it).
fn total(dir: &Path, col: &str) -> u64 {
    steps(dir).iter().map(|r| num(r, col) as u64).sum()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is no count"))
}

#[test]
fn the_shipped_profile_tallies_exactly_what_the_target_did_wrong_and_fails_its_gates() {
    let _share = machine::loading();
    let (dir, out) = run_races("races-bugs", SHIPPED, &["--concurrency", "4"]);
    assert_eq!(out.status.code(), Some(1), "the gates fail the run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("thresholds failed: lost_updates==0, double_effects==0"),
        "{stderr}"
    );
    for r in steps(&dir) {
        // Every iteration ran to its tally: the target's counters cover the tallied ones.
        assert_eq!(num(&r, "iterations_failed"), 0.0, "step {}", r["step"]);
        assert_eq!(num(&r, "iterations_interrupted"), 0.0, "step {}", r["step"]);
    }
    let truth = target_stats(&dir);
    let lost = total(&dir, "lost_updates");
    assert_eq!(lost, n(&truth["races"]["overwritten"]), "{truth:#}");
    assert!(
        lost > 0,
        "16 racy adds at once, 5 ms between read and write"
    );
    let double = total(&dir, "double_effects");
    assert_eq!(double, n(&truth["jobs"]["double_effects"]), "{truth:#}");
    assert!(double > 0);
    let stale = total(&dir, "stale_reads");
    assert_eq!(stale, n(&truth["races"]["stale_reads"]), "{truth:#}");
    assert!(stale > 0);
    assert!(
        steps(&dir)
            .iter()
            .all(|r| r["accepted_conflicts"].is_empty()),
        "no tally counts accepted conflicts: the column stays empty"
    );

    // The findings: each with its request ids, the values seen and the likely cause.
    let s = summary(&dir);
    let findings: Vec<&Value> = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["findings"].as_array().unwrap())
        .collect();
    for (defect, check, var) in [
        ("lost_updates", "counter/count", "after"),
        ("double_effects", "payment/count", "job_ids"),
        ("stale_reads", "profile_update/count", "saw"),
    ] {
        let f = findings
            .iter()
            .find(|f| f["defect"] == defect)
            .unwrap_or_else(|| panic!("no {defect} finding"));
        assert_eq!(f["check"], check);
        assert!(n(&f["count"]) > 0 && n(&f["step"]) >= 1);
        assert!(!f["request_ids"].as_array().unwrap().is_empty(), "{f:#}");
        assert!(f["values"].get(var).is_some(), "{f:#}");
        assert!(!f["cause"].as_str().unwrap().is_empty());
    }
    let lost_finding = findings
        .iter()
        .find(|f| f["defect"] == "lost_updates")
        .unwrap();
    let v = &lost_finding["values"];
    assert_eq!(
        16 - (n(&v["after"]) - n(&v["before"])),
        n(&lost_finding["count"]),
        "{lost_finding:#}"
    );
    // 1 open + 16 adds + 1 read, each kept by id.
    assert_eq!(
        lost_finding["request_ids"].as_array().unwrap().len() as u64
            + v["more_request_ids"].as_u64().unwrap_or(0),
        18
    );

    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(
        terminal.contains(&format!(
            "Correctness: lost_updates {lost}, double_effects {double}, stale_reads {stale}"
        )),
        "{terminal}"
    );
    assert!(
        terminal.contains("likely cause: a read-modify-write"),
        "{terminal}"
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<h2>Correctness</h2>"));
    assert!(html.contains("Likely cause: the idempotency key"));
    let gates: Vec<&str> = s["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["holds"] == false)
        .map(|g| g["threshold"].as_str().unwrap())
        .collect();
    assert_eq!(gates, ["lost_updates==0", "double_effects==0"]);
}

#[test]
fn with_the_bugs_off_every_tally_is_zero_and_the_gates_pass() {
    let _share = machine::loading();
    let sound: String = SHIPPED
        .lines()
        .filter(|l| {
            !["racy =", "job_key_break_every =", "read_lag_ms ="]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (dir, out) = run_races("races-sound", &sound, &["--concurrency", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let truth = target_stats(&dir);
    for col in ["lost_updates", "double_effects", "stale_reads"] {
        assert_eq!(total(&dir, col), 0, "{col}");
    }
    assert_eq!(n(&truth["races"]["overwritten"]), 0);
    assert!(n(&truth["races"]["counter_adds"]) > 0);
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(
        terminal.contains("Correctness: lost_updates 0, double_effects 0, stale_reads 0"),
        "{terminal}"
    );
    assert!(!terminal.contains("likely cause"), "{terminal}");
    let s = summary(&dir);
    assert!(
        s["gates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["holds"] == true)
    );
}

#[test]
fn a_tally_that_cannot_count_fails_its_iteration_by_name_and_mistakes_stop_the_profile() {
    let _share = machine::loading();
    let text = r#"
[target.builtin]

[load]
concurrency = [1]
duration = "500ms"

[[scenario]]
name = "negative"
  [[scenario.step]]
  name = "read"
  call = { method = "tools/call", tool = "counter_read", args = { key = "{{uuid}}" } }
  capture = { v = "result.structuredContent.value" }
  [[scenario.step]]
  name = "count"
  tally = { lost_updates = "var.v - 1" }
"#;
    let (dir, out) = run_races("races-negative", text, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a failed step without gates is no failed run"
    );
    let row = table(&dir, "scenarios.csv")
        .into_iter()
        .find(|r| r["part"] == "*")
        .unwrap();
    assert!(
        row["failure_reasons"].contains("count: tally lost_updates = var.v - 1: gave -1"),
        "{row:?}"
    );
    // No iteration reached its count: the column says nothing was tallied.
    assert_eq!(steps(&dir)[0]["lost_updates"], "");

    for (name, step, wants) in [
        (
            "unknown-count",
            r#"tally = { lost = "1" }"#,
            "unknown count `lost` (counts: lost_updates, double_effects, accepted_conflicts, stale_reads)",
        ),
        (
            "copies-on-a-call",
            r#"call = { method = "tools/call", tool = "echo", copies = 2 }"#,
            "`copies` belongs to a `parallel` member",
        ),
        (
            "unknown-function",
            r#"expect = "count(var.x) == 1""#,
            "unknown function `count`",
        ),
    ] {
        let dir = scratch(&format!("races-mistake-{name}"));
        let p = profile(
            &dir,
            name,
            &format!(
                "[target.builtin]\n\n[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  call = {{ method = \"tools/call\", tool = \"echo\" }}\n  capture = {{ x = \"result.content\" }}\n  [[scenario.step]]\n  {step}\n"
            ),
        );
        let out = bin().args(["run", "-q"]).arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(wants), "{name}: {err}");
        assert!(err.contains(&format!("{name}.toml:9:")), "{name}: {err}");
    }
}
