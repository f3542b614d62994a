//! `run --junit FILE` and `--summary-md FILE` (or `$GITHUB_STEP_SUMMARY`) against the built-in
//! target: the JUnit file read by an independent consumer (PyPI `junitparser`, installed by
//! tests/report_py/setup.sh) and round-tripped through quick-junit, each case checked against
//! steps.csv and summary.json; a run that could not run is an `error` case.

use crate::support::bin;
use crate::support::installed::installed;
use crate::support::run::{num, steps, summary};
use crate::support::scratch::scratch;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// The JUnit file as junitparser reads it (tests/report_py/read_junit.py).
fn read_junit(file: &Path) -> Value {
    let py = installed("report_py").join(".venv/bin/python");
    let out = Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_py/read_junit.py"))
        .arg(file)
        .output()
        .expect("run the Python reader");
    assert!(
        out.status.success(),
        "read_junit.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `mcpload run --builtin` calling echo for two 1 s steps, with `more` flags.
fn run_builtin(out: &Path, more: &[&str], step_summary: Option<&Path>) -> Output {
    let mut cmd = bin();
    cmd.args([
        "run",
        "-q",
        "--builtin",
        "-c",
        "1,2",
        "-d",
        "1s",
        "--warmup",
        "0s",
    ])
    .args(["--tool", "echo", "--args", r#"{"message":"hi"}"#, "--out"])
    .arg(out)
    .args(more)
    .env_remove("GITHUB_STEP_SUMMARY");
    if let Some(f) = step_summary {
        cmd.env("GITHUB_STEP_SUMMARY", f);
    }
    cmd.output().unwrap()
}

fn case<'a>(suite: &'a Value, name: &str) -> &'a Value {
    suite["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name} in {suite:#}"))
}

#[test]
fn junit_has_a_case_per_threshold_check_and_step_that_an_independent_reader_agrees_with() {
    let dir = scratch("ci-junit");
    let out = dir.join("run");
    let xml = dir.join("junit.xml");
    let md = dir.join("summary.md");
    let o = run_builtin(
        &out,
        &[
            "--threshold",
            "requests<1",
            "--threshold",
            "error_rate<0.5",
            "--threshold",
            "spawn_p99_ms<100",
            "--junit",
            xml.to_str().unwrap(),
            "--summary-md",
            md.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(1), "a threshold fails");
    let s = summary(&out);
    let rows = steps(&out);
    let suites = read_junit(&xml);
    let suite = &suites[0];
    assert_eq!(suites.as_array().unwrap().len(), 1);
    let p = &suite["properties"];
    assert_eq!(p["run_id"], "run");
    assert_eq!(p["target"], "builtin");
    assert_eq!(p["revision"], s["protocol_revision"]);
    assert_eq!(p["seed"], s["settings"]["seed"].to_string());
    assert_eq!(p["status"], "complete");

    // requests<1 fails where requests were most: the message names the figure, its value
    // from steps.csv, the limit and the step.
    let (most, at) = rows
        .iter()
        .map(|r| (num(r, "requests"), num(r, "step")))
        .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
    let failed = case(suite, "threshold requests<1");
    assert_eq!(failed["classname"], "mcpload.thresholds");
    assert_eq!(failed["result"], "failure");
    assert_eq!(
        failed["message"],
        format!("requests = {most} > 1 in step {at}")
    );
    assert_eq!(case(suite, "threshold error_rate<0.5")["result"], "passed");
    // An HTTP run has no spawn time: nothing to judge, so skipped, not failed.
    assert_eq!(
        case(suite, "threshold spawn_p99_ms<100")["result"],
        "skipped"
    );

    let checks = s["checks"].as_array().unwrap();
    assert!(!checks.is_empty());
    for c in checks {
        let want = match c["status"].as_str().unwrap() {
            "fail" => "failure",
            "skipped" => "skipped",
            _ => "passed",
        };
        let got = case(suite, &format!("check {}", c["id"].as_str().unwrap()));
        assert_eq!(got["result"], want, "{c}");
        assert_eq!(got["classname"], "mcpload.checks");
    }
    for (i, level) in [(1, 1), (2, 2)] {
        let step = case(suite, &format!("step {i} ({level} concurrent)"));
        assert_eq!(step["result"], "passed");
    }
    let skipped_checks = checks.iter().filter(|c| c["status"] == "skipped").count();
    assert_eq!(suite["tests"], 3 + checks.len() + rows.len());
    assert_eq!(suite["failures"], 1);
    assert_eq!(suite["skipped"], 1 + skipped_checks);
    assert_eq!(suite["errors"], 0);

    // The crate that wrote it reads it back unchanged.
    let text = std::fs::read_to_string(&xml).unwrap();
    let again = quick_junit::Report::deserialize_from_str(&text).unwrap();
    assert_eq!(again.to_string().unwrap(), text);

    // The Markdown: the verdict first, a row per step, the failed gate, the folder.
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.starts_with("### ❌ mcpload builtin: 2 of 3 thresholds failed"),
        "{md}"
    );
    assert!(
        md.contains(&format!("requests = {most} > 1 in step {at}")),
        "{md}"
    );
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 2 |"))
            .count(),
        2,
        "{md}"
    );
    assert!(
        md.contains(&format!("Results: `{}`", out.display())),
        "{md}"
    );
}

#[test]
fn a_run_that_could_not_run_is_an_error_case_and_the_step_summary_is_appended_to() {
    let dir = scratch("ci-error");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\n[load]\nmodel = \"sideways\"\n").unwrap();
    let xml = dir.join("junit.xml");
    let step_summary = dir.join("step-summary.md");
    std::fs::write(&step_summary, "earlier step\n").unwrap();
    let o = bin()
        .arg("run")
        .arg(&bad)
        .arg("--junit")
        .arg(&xml)
        .env("GITHUB_STEP_SUMMARY", &step_summary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let suites = read_junit(&xml);
    let run = case(&suites[0], "run");
    assert_eq!(run["result"], "error");
    let why = run["message"].as_str().unwrap();
    assert!(
        why.contains("bad.toml:3:9") && why.contains("sideways"),
        "{why}"
    );

    // No --summary-md: appended to $GITHUB_STEP_SUMMARY, after what was there.
    let text = std::fs::read_to_string(&step_summary).unwrap();
    assert!(
        text.starts_with("earlier step\n### ⚠️ mcpload run could not run"),
        "{text}"
    );
    let o = run_builtin(
        &dir.join("run"),
        &["--threshold", "error_rate<0.5"],
        Some(&step_summary),
    );
    assert_eq!(o.status.code(), Some(0));
    let text = std::fs::read_to_string(&step_summary).unwrap();
    assert!(
        text.contains("### ✅ mcpload builtin: all 1 thresholds hold"),
        "{text}"
    );
    assert!(text.starts_with("earlier step\n"), "{text}");
}

#[test]
fn repeated_runs_are_one_suite_each() {
    let dir = scratch("ci-repeat");
    let xml = dir.join("junit.xml");
    let o = run_builtin(
        &dir.join("runs"),
        &[
            "--repeat",
            "2",
            "--threshold",
            "error_rate<0.5",
            "--junit",
            xml.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let suites = read_junit(&xml);
    let names: Vec<&str> = suites
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["properties"]["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["run-1", "run-2"]);
}
