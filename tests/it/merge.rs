//! `mcpload merge` on real runs of the built-in target: one whole run merged alone is itself,
//! byte for byte; runs labelled as segments of one run add up to the union of their
//! histograms (checked by HdrHistogram's Python port); folders that cannot be merged are
//! refused with the folder and the reason; a failed gate exits 1.

use crate::support::installed::installed;
use crate::support::machine;
use crate::support::mcpload;
use crate::support::run::{num, profile, run, steps, summary};
use crate::support::scratch::scratch;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Two operations, so ops.csv has a row for each; two short steps.
const MIX: &str = r#"
name = "merge-mix"
[target.builtin]
service_ms = "fixed:2"
[load]
model = "closed"
concurrency = "1,2"
duration = "1s"
warmup = "200ms"
timeout = "2s"
[[mix]]
method = "tools/call"
tool = "echo"
args = { message = "hello {{seq}}" }
weight = 3
[[mix]]
method = "tools/list"
weight = 1
"#;

/// A scenario of two calls, so scenarios.csv has a `*` row and one per step.
const SCENARIO: &str = r#"
name = "merge-scenario"
[target.builtin]
service_ms = "fixed:2"
[load]
model = "closed"
concurrency = "1,2"
duration = "1s"
warmup = "200ms"
timeout = "2s"
[[scenario]]
name = "pair"
  [[scenario.step]]
  name = "say"
  call = { method = "tools/call", tool = "echo", args = { message = "x" } }
  [[scenario.step]]
  name = "list"
  call = { method = "tools/list" }
"#;

/// Runs `text` as a profile into `<root>/<name>`.
fn run_into(root: &Path, name: &str, text: &str) -> PathBuf {
    let p = profile(root, &format!("{name}-profile"), text);
    let out = root.join(name);
    let o = run(&[p.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "mcpload run {name} failed");
    out
}

fn merge(args: &[&str]) -> Output {
    let mut all = vec!["merge"];
    all.extend_from_slice(args);
    mcpload(&all)
}

fn told(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Marks a run folder as segment `index` of `count`, its step windows at `starts_ms`.
fn label(dir: &Path, index: u32, count: u32, starts_ms: &[f64]) {
    let path = dir.join("summary.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let steps: Vec<Value> = starts_ms
        .iter()
        .enumerate()
        .map(|(k, t)| json!({"step": k + 1, "start_unix_ms": t, "end_unix_ms": t + 1000.0}))
        .collect();
    s["segment"] = json!({
        "index": index, "count": count, "start_at": null, "start_late_ms": 0.0, "steps": steps
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&s).unwrap()).unwrap();
}

/// Copies a run folder (flat) to `to`.
fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn assert_same_tables(a: &Path, b: &Path) {
    for f in ["steps.csv", "ops.csv", "scenarios.csv", "timeseries.csv"] {
        let (x, y) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        assert!(
            x == y,
            "{f} differs:\n--- {}\n{}\n--- {}\n{}",
            a.display(),
            String::from_utf8_lossy(&x),
            b.display(),
            String::from_utf8_lossy(&y)
        );
    }
}

/// Merging one whole run gives back its tables: every count and histogram the tables are
/// made from is recorded losslessly, and the merge recomputes them with the run's own code.
#[test]
fn one_whole_run_merged_alone_is_itself() {
    let _share = machine::loading();
    let root = scratch("merge_identity");
    for (name, text) in [("mix", MIX), ("scenario", SCENARIO)] {
        let dir = run_into(&root, name, text);
        let rows = crate::support::run::table(
            &dir,
            if name == "mix" {
                "ops.csv"
            } else {
                "scenarios.csv"
            },
        );
        assert!(rows.len() >= 4, "{name}: {rows:?}");
        assert!(steps(&dir).iter().all(|r| num(r, "requests") > 0.0));
        let out = root.join(format!("{name}-merged"));
        let o = merge(&[dir.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", told(&o));
        assert_same_tables(&dir, &out);
        // The record itself round-trips too, and the merged folder is a normal one.
        for f in ["histograms.hlog", "latency.hlog"] {
            assert_eq!(
                std::fs::read(dir.join(f)).unwrap(),
                std::fs::read(out.join(f)).unwrap(),
                "{name}: {f}"
            );
        }
        let s = summary(&out);
        assert_eq!(s["partial"], false);
        assert_eq!(s["merged_from"][0]["status"], "complete");
        assert_eq!(s["knee"], summary(&dir)["knee"]);
        let r = mcpload(&["report", out.to_str().unwrap()]);
        assert!(r.status.success(), "{}", told(&r));
        let c = mcpload(&["compare", dir.to_str().unwrap(), out.to_str().unwrap()]);
        assert!(c.status.success(), "{}", told(&c));
    }
}

/// Two runs labelled as segments 1/2 and 2/2: the merged counts are their sums, and every
/// merged histogram, read by HdrHistogram's Python port, is the union of the inputs'.
#[test]
fn segments_add_up_to_the_union_of_their_histograms() {
    let _share = machine::loading();
    let root = scratch("merge_union");
    let a = run_into(&root, "a", MIX);
    let b = run_into(&root, "b", MIX);
    label(&a, 1, 2, &[1e12, 1e12 + 1500.0]);
    // Step 2 of segment 2 began 400 ms after segment 1's: more than a tenth of 1 s.
    label(&b, 2, 2, &[1e12 + 20.0, 1e12 + 1900.0]);
    let out = root.join("merged");
    let o = merge(&[
        b.to_str().unwrap(),
        a.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", told(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("segment 1/2") && stdout.contains("segment 2/2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("WARNING") && stdout.contains("step 2"),
        "{stdout}"
    );
    let s = summary(&out);
    assert_eq!(
        s["misaligned"].as_array().unwrap().len(),
        1,
        "{}",
        s["misaligned"]
    );
    assert_eq!(s["misaligned"][0]["index"], 2);
    assert_eq!(s["merged_from"][0]["index"], 1);
    let (sa, sb, sm) = (steps(&a), steps(&b), steps(&out));
    assert_eq!(sm.len(), 2);
    for k in 0..2 {
        for col in ["requests", "responses", "ok", "concurrency"] {
            assert_eq!(
                num(&sm[k], col),
                num(&sa[k], col) + num(&sb[k], col),
                "{col}"
            );
        }
        let d = num(&sm[k], "duration_s");
        assert_eq!(d, num(&sa[k], "duration_s").max(num(&sb[k], "duration_s")));
    }
    let py = installed("report_py").join(".venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_py/union_hlog.py");
    for f in ["histograms.hlog", "latency.hlog"] {
        let o = Command::new(&py)
            .arg(&script)
            .arg(out.join(f))
            .arg(a.join(f))
            .arg(b.join(f))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let tags: Value = serde_json::from_slice(&o.stdout).unwrap();
        let tags = tags.as_object().unwrap();
        assert!(tags.len() >= 2, "{f}: {tags:?}");
        for (tag, t) in tags {
            assert!(t["merged"]["count"].as_u64() > Some(0), "{f} {tag}: {t}");
            assert_eq!(t["merged"], t["union"], "{f} {tag}");
        }
        if f == "histograms.hlog" {
            for k in 0..2 {
                let t = &tags[&format!("step={}/latency", k + 1)];
                assert_eq!(
                    t["merged"]["count"].as_f64(),
                    Some(num(&sm[k], "responses"))
                );
            }
        }
    }
}

/// What cannot be merged is refused (exit 2) with the folder and the reason; --partial
/// merges what is there and says so; a gate that fails exits 1.
#[test]
fn folders_that_cannot_be_merged_are_refused() {
    let _share = machine::loading();
    let root = scratch("merge_refusals");
    let a = run_into(&root, "a", MIX);
    let other = run_into(&root, "other", &MIX.replace("weight = 3", "weight = 2"));
    let refused = |args: &[&str], words: &[&str]| {
        let o = merge(args);
        let t = told(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        for w in words {
            assert!(t.contains(w), "{args:?}: no {w:?} in {t}");
        }
    };
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    // Two whole runs are not segments of one.
    refused(&[&s(&a), &s(&other)], &[&s(&a), "not a segment"]);
    label(&a, 1, 2, &[]);
    label(&other, 2, 2, &[]);
    refused(&[&s(&a), &s(&other)], &[&s(&other), "profile differs"]);
    let twin = root.join("twin");
    copy(&a, &twin);
    refused(&[&s(&a), &s(&twin)], &[&s(&twin), "segment 1/2 twice"]);
    refused(&[&s(&a)], &["segment(s) 2 of 2 missing", "--partial"]);
    let partial = root.join("partial");
    let o = merge(&[&s(&a), "--partial", "--out", &s(&partial)]);
    assert!(o.status.success(), "{}", told(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("PARTIAL"),
        "{}",
        told(&o)
    );
    assert_eq!(summary(&partial)["partial"], true);
    // A gate that fails on the merged run: exit 1, the merged folder written.
    let gated = root.join("gated");
    let o = merge(&[
        &s(&a),
        "--partial",
        "--threshold",
        "p99_ms<0.001",
        "--out",
        &s(&gated),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", told(&o));
    assert!(told(&o).contains("thresholds failed"), "{}", told(&o));
    assert_eq!(summary(&gated)["gates"][0]["holds"], false);
    // A folder from before the lossless record.
    let old = root.join("old");
    copy(&twin, &old);
    std::fs::remove_file(old.join("counts.jsonl")).unwrap();
    refused(&[&s(&old)], &[&s(&old), "no counts.jsonl"]);
    // A segment of another count.
    label(&twin, 1, 3, &[]);
    refused(&[&s(&a), &s(&twin)], &["segment of 2"]);
}
