//! `mcpload ab` and `compare --baseline/--candidate` end to end against the built-in target,
//! whose service time is known exactly: a side 4x slower regresses (exit 1, every
//! latency and the throughput named), the same target twice never does, a bad side is exit
//! 2; `run --repeat` writes its folders and compare judges the sets, unpaired and by batch
//! means.

use crate::support::bin;
use crate::support::machine;
use crate::support::run::{profile, run, summary};
use crate::support::scratch::scratch;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

const PROFILE: &str = r#"
name = "ab"
[target]
builtin = {}
[load]
model = "closed"
concurrency = "4"
duration = "1s"
warmup = "300ms"
[[mix]]
method = "tools/call"
tool = "echo"
args = { message = "hi" }
"#;

/// `mcpload ab PROFILE --a-builtin A --b-builtin B --out OUT MORE...`.
fn run_ab(profile: &Path, a: &str, b: &str, out: &Path, more: &[&str]) -> Output {
    bin()
        .arg("ab")
        .arg(profile)
        .args(["--a-builtin", a, "--b-builtin", b])
        .arg("--out")
        .arg(out)
        .args(more)
        .output()
        .unwrap()
}

/// `mcpload compare --baseline BASE --candidate CANDIDATE`.
fn compare(base: &Path, candidate: &Path) -> Output {
    bin()
        .args(["compare", "--baseline"])
        .arg(base)
        .arg("--candidate")
        .arg(candidate)
        .output()
        .unwrap()
}

fn ab_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("ab.json")).unwrap()).unwrap()
}

/// The pairs whose two runs were both used (a busy machine can leave runs generator-bound,
/// and a run left out takes its pair out).
fn used_pairs(ab: &Value) -> usize {
    let runs = ab["runs"].as_array().unwrap();
    let used = |side: &str, pair: &Value| {
        runs.iter()
            .any(|r| r["side"] == side && r["pair"] == *pair && r["used"] == true)
    };
    ab["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| used("a", &p["pair"]) && used("b", &p["pair"]))
        .count()
}

/// Where the word `regressed` stands in `v` other than as a `verdict` value (paths).
fn regressed_outside_verdicts(v: &Value, path: &str, found: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{path}/{k}");
                if k.contains("regressed") {
                    found.push(here.clone());
                }
                if !(k == "verdict" && x == "regressed") {
                    regressed_outside_verdicts(x, &here, found);
                }
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| regressed_outside_verdicts(x, &format!("{path}[]"), found)),
        Value::String(s) if s.contains("regressed") => found.push(path.to_owned()),
        _ => {}
    }
}

/// The step-level figure `name` of ab.json.
fn figure<'a>(ab: &'a Value, name: &str) -> &'a Value {
    ab["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == name && f["op"] == "*")
        .unwrap_or_else(|| panic!("no {name} in {ab:#}"))
}

#[test]
fn a_side_four_times_slower_regresses_and_every_run_is_a_run_folder() {
    let _share = machine::measuring();
    let dir = scratch("ab-slower");
    let p = profile(&dir, "ab", PROFILE);
    let out = dir.join("ab");
    let md_file = dir.join("pr.md");
    let o = run_ab(
        &p,
        "service_ms=5",
        "service_ms=20",
        &out,
        &[
            "--pairs",
            "5",
            "--seed",
            "7",
            "-q",
            "--summary-md",
            md_file.to_str().unwrap(),
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let ab = ab_json(&out);
    // A run the generator limited (a busy machine wakes mcpload late) is left out with its
    // pair, exactly as its summary.json says, and the reason is given; one-second steps are
    // too short for the trend check, so nothing else is left out.
    let runs = ab["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 10);
    let bound = |side: &Value, pair: &Value| {
        runs.iter()
            .find(|r| r["side"] == *side && r["pair"] == *pair)
            .is_some_and(|r| r["generator_bound"].is_string())
    };
    for r in runs {
        let s = summary(&out.join(r["dir"].as_str().unwrap()));
        let truth = s["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["generator_bound"] == true);
        assert_eq!(r["generator_bound"].is_string(), truth, "{r:#}");
        let other = if r["side"] == "a" { "b" } else { "a" };
        let partner = bound(&Value::from(other), &r["pair"]);
        assert_eq!(r["used"] == true, !truth && !partner, "{r:#}");
        if truth {
            assert!(
                r["reason"].as_str().unwrap().contains("generator-bound"),
                "{r:#}"
            );
        } else if partner {
            assert_eq!(r["reason"], "its pair's other run is left out");
        }
    }
    let used_pairs = used_pairs(&ab);
    if used_pairs < 2 {
        assert_eq!(o.status.code(), Some(2), "{text}");
        return;
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{text}\n{err}");
    assert_eq!(ab["verdict"], "regressed", "{ab:#}");
    let mut stray = Vec::new();
    regressed_outside_verdicts(&ab, "", &mut stray);
    assert!(
        stray.is_empty(),
        "'regressed' outside a verdict at {stray:?}"
    );
    assert_eq!(ab["status"], "complete");
    assert_eq!(ab["seed"], 7);
    for name in ["throughput_rps", "p50_ms", "p99_ms"] {
        let f = figure(&ab, name);
        assert_eq!(f["n"], used_pairs, "{f:#}");
        if name == "p99_ms" && f["verdict"] == "inconclusive" {
            // The tail is the noisy figure: on a busy machine one stalled run of a few
            // pairs can widen its interval past a decision, and the verdict then says how
            // many pairs would decide it. Never "equivalent" or "improved".
            assert!(
                f["needed"].as_u64().is_none_or(|k| k as usize > used_pairs),
                "{f:#}"
            );
        } else {
            assert_eq!(f["verdict"], "regressed", "{f:#}");
        }
    }
    // 5 ms against 20 ms of service: the median latency ratio is near 4, and throughput's
    // near 1/4 (4 clients, closed loop).
    let p50 = figure(&ab, "p50_ms");
    let r = p50["ratio"].as_f64().unwrap();
    assert!((2.5..4.5).contains(&r), "{p50:#}");
    assert!(p50["ratio_lo"].as_f64().unwrap() <= r && r <= p50["ratio_hi"].as_f64().unwrap());
    let t = figure(&ab, "throughput_rps")["ratio"].as_f64().unwrap();
    assert!((0.2..0.45).contains(&t), "throughput ratio {t}");
    // No errors either side: the rule of three makes that no regression.
    assert_ne!(figure(&ab, "error_rate")["verdict"], "regressed");
    // Pairs: every order recorded, each run an ordinary folder.
    let pairs = ab["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 5);
    for (i, pair) in pairs.iter().enumerate() {
        assert!(pair["order"] == "ab" || pair["order"] == "ba", "{pair}");
        for side in ["a", "b"] {
            let run = out.join(format!("{side}-{:02}", i + 1));
            assert!(run.join("steps.csv").is_file(), "{}", run.display());
            assert!(run.join("summary.json").is_file());
        }
    }
    // The same seed draws the same orders.
    let again = dir.join("again");
    let o2 = run_ab(
        &p,
        "service_ms=5",
        "service_ms=20",
        &again,
        &["--pairs", "2", "--seed", "7", "-q"],
    );
    assert!(o2.status.code() == Some(1) || o2.status.code() == Some(2));
    let orders = |v: &Value| -> Vec<Value> {
        v["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["order"].clone())
            .collect()
    };
    assert_eq!(orders(&ab)[..2], orders(&ab_json(&again))[..]);
    // `regressed` appears in ab.json only as a verdict.
    let raw = std::fs::read_to_string(out.join("ab.json")).unwrap();
    let verdicts = raw.matches("\"verdict\": \"regressed\"").count();
    assert!(verdicts >= 3);
    assert_eq!(raw.matches("regressed").count(), verdicts, "{raw}");
    // The reports.
    assert!(
        text.contains("p50_ms") && text.contains("regressed"),
        "{text}"
    );
    let md = std::fs::read_to_string(dir.join("pr.md")).unwrap();
    assert!(md.starts_with("### ❌ mcpload ab: regressed"), "{md}");
    assert!(md.contains("| `p99_ms` |"), "{md}");
    assert_eq!(md, std::fs::read_to_string(out.join("summary.md")).unwrap());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("Every figure"),
        "report.html"
    );
}

#[test]
fn the_same_target_twice_never_regresses_past_a_wide_band_generator_bound_runs_kept() {
    // A band of 50%: equal servers cannot lie wholly past it, however loaded the machine.
    let _share = machine::measuring();
    let dir = scratch("ab-same");
    let p = profile(&dir, "ab", PROFILE);
    let out = dir.join("ab");
    let o = run_ab(
        &p,
        "service_ms=5",
        "service_ms=5",
        &out,
        &[
            "--pairs",
            "3",
            "--band",
            "0.5",
            "-q",
            "--keep-generator-bound",
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let ab = ab_json(&out);
    assert_ne!(ab["verdict"], "regressed");
    assert!(ab["seed"].is_u64(), "a seed drawn is recorded: {ab:#}");
    assert_eq!(ab["keep_generator_bound"], true);
    // Asked to keep them: every run is used, those summary.json calls generator-bound named
    // as such, and one warning lists them.
    let mut kept = Vec::new();
    for r in ab["runs"].as_array().unwrap() {
        let s = summary(&out.join(r["dir"].as_str().unwrap()));
        let bound = s["steps"][0]["generator_bound"] == true;
        assert_eq!(r["generator_bound"].is_string(), bound, "{r:#}");
        assert_eq!(r["used"], true, "{r:#}");
        if bound {
            kept.push(r["dir"].as_str().unwrap().to_owned());
        }
    }
    let warned = (ab["warnings"].as_array().unwrap().iter())
        .filter_map(|w| w.as_str())
        .find(|w| w.starts_with("generator-bound:"));
    match warned {
        None => assert!(kept.is_empty(), "{kept:?} not warned of"),
        Some(w) => {
            let says = format!("{} of the runs compared ({})", kept.len(), kept.join(", "));
            assert!(w.contains(&says), "{w}");
        }
    }
    assert_eq!(used_pairs(&ab), 3);
    assert_eq!(o.status.code(), Some(0), "{text}");
    for f in ab["figures"].as_array().unwrap() {
        assert_ne!(f["verdict"], "regressed", "{f:#}");
        let p = f["p_value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p));
    }
    // One-second steps are too short for the trend check, and the report says so.
    assert!(text.contains("trend not checked"), "{text}");
    let trends = &ab["runs"][0]["trends"][0];
    assert!(trends["trend"].is_null(), "{trends}");
}

#[test]
fn a_bad_side_or_a_used_folder_is_exit_2_before_any_run() {
    let dir = scratch("ab-bad");
    let p = profile(&dir, "ab", PROFILE);
    let o = run_ab(
        &p,
        "service_ms=5",
        "no_such_knob=1",
        &dir.join("x"),
        &["--pairs", "2"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no_such_knob"), "{err}");
    assert!(!dir.join("x").join("a-01").exists(), "no run started");

    std::fs::create_dir_all(dir.join("used")).unwrap();
    std::fs::write(dir.join("used").join("file"), "x").unwrap();
    let o = run_ab(&p, "", "", &dir.join("used"), &["--pairs", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("already holds files"), "{err}");

    let o = bin()
        .args(["ab", p.to_str().unwrap(), "--a-builtin", "", "--pairs", "2"])
        .arg("--out")
        .arg(dir.join("y"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "a side missing");
}

#[test]
fn repeated_runs_compare_as_sets_and_one_run_a_side_falls_back_to_batch_means() {
    let _share = machine::measuring();
    let dir = scratch("ab-sets");
    for (name, ms) in [("fast", "5"), ("slow", "20")] {
        let o = run(&[
            "--builtin",
            "--builtin-knob",
            &format!("service_ms={ms}"),
            "-c",
            "4",
            "-d",
            "4s",
            "--warmup",
            "300ms",
            "--repeat",
            "3",
            "--out",
            dir.join(name).to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0));
        for i in 1..=3 {
            assert!(
                dir.join(name)
                    .join(format!("run-{i}"))
                    .join("summary.json")
                    .is_file()
            );
        }
    }
    let o = compare(&dir.join("fast"), &dir.join("slow"));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("3 runs against 3 runs, unpaired"), "{text}");
    assert!(text.contains("Welch"), "{text}");
    // A busy machine may leave runs generator-bound: they are left out, named, and with
    // fewer than 2 runs a side left nothing is judged (exit 2).
    let left_out = |side: &str| {
        text.lines()
            .filter(|l| l.starts_with("left out:") && l.contains(&format!("/{side}/")))
            .inspect(|l| assert!(l.contains("generator-bound"), "{l}"))
            .count()
    };
    if left_out("fast") > 1 || left_out("slow") > 1 {
        assert_eq!(o.status.code(), Some(2), "{text}");
    } else {
        assert_eq!(o.status.code(), Some(1), "{text}");
        assert!(text.contains("regressed"), "{text}");
        // The same folders the other way round: the candidate is faster, never a regression.
        let o = compare(&dir.join("slow"), &dir.join("fast"));
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{text}");
        assert!(text.contains("improved"), "{text}");
    }

    let o = compare(
        &dir.join("fast").join("run-1"),
        &dir.join("slow").join("run-1"),
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("weak test"), "{text}");
    assert!(text.contains("batch means"), "{text}");
    // No request failed: a batch counts the requests that ended in it, so the requests in
    // flight across a second's edge are no errors.
    let rate_row: Vec<&str> = text
        .lines()
        .find(|l| l.contains("error_rate"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(rate_row[4..6], ["0%", "0%"], "{text}");
}
