//! `mcpload run` broken down by operation end to end: a two-operation mix against the
//! built-in target writes ops.csv rows that add up to steps.csv, and gates on one operation
//! are checked at the end of the run.

use crate::support::run::*;
use crate::support::scratch::scratch;

#[test]
fn a_two_operation_run_writes_ops_rows_that_add_up_to_its_steps() {
    let dir = scratch("run-ops");
    let p = profile(
        &dir,
        "two-ops",
        r#"
[target]
builtin = {}

[load]
concurrency = [1, 2]
duration = "1s"
warmup = "100ms"
timeout = "5s"

[[mix]]
method = "tools/call"
tool = "echo"
args = { message = "hi" }

[[mix]]
method = "tools/call"
tool = "sleep"
args = { ms = 2 }
"#,
    );
    let out_dir = dir.join("run");
    let out = run(&[
        p.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--threshold",
        "error_rate{op=echo}<0.5",
        "--threshold",
        "p99_ms{op=tools/list}<1000",
    ]);
    // The operation the mix never sends fails its gate (exit code 1), and only that one.
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("p99_ms{op=tools/list}<1000"), "{err}");
    assert!(!err.contains("{op=echo}"), "{err}");

    let steps = steps(&out_dir);
    assert_eq!(steps.len(), 2);
    let mut r = csv::Reader::from_path(out_dir.join("ops.csv")).unwrap();
    let header = r.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    for s in &steps {
        let step = &s["step"];
        let mine: Vec<&csv::StringRecord> =
            rows.iter().filter(|r| &r[col("step")] == step).collect();
        let names: Vec<&str> = mine.iter().map(|r| &r[col("op")]).collect();
        assert_eq!(names, ["echo", "sleep", "-"], "step {step}");
        let count = |r: &csv::StringRecord, c: &str| r[col(c)].parse::<f64>().unwrap();
        for c in [
            "requests",
            "responses",
            "ok",
            "errors",
            "missing",
            "timeouts",
        ] {
            let sum: f64 = mine.iter().map(|r| count(r, c)).sum();
            assert_eq!(sum, num(s, c), "step {step}: {c}");
        }
        assert!(count(mine[0], "requests") > 0.0 && count(mine[1], "requests") > 0.0);
        // A sleep of 2 ms is never answered faster than that; an echo is.
        assert!(count(mine[1], "p50_ms") >= 2.0, "{:?}", mine[1]);
        assert_eq!(count(mine[2], "requests"), 0.0);
    }
}

/// ops.csv's rows of one step, by operation name.
fn ops_of_step(
    dir: &std::path::Path,
    step: &str,
) -> std::collections::HashMap<String, std::collections::HashMap<String, String>> {
    table(dir, "ops.csv")
        .into_iter()
        .filter(|r| r["step"] == step)
        .map(|r| (r["op"].clone(), r))
        .collect()
}

#[test]
fn a_mix_entry_has_a_timeout_of_its_own() {
    let dir = scratch("run-ops-entry-timeout");
    // The slow entry's own timeout is shorter than its calls: every one of them times out,
    // while the echo beside it, under the load's timeout, never does.
    let p = profile(
        &dir,
        "short",
        r#"
[target]
builtin = {}

[load]
concurrency = [2]
duration = "1s"
warmup = "0s"
timeout = "5s"

[[mix]]
method = "tools/call"
tool = "sleep"
args = { ms = 400 }
timeout = "100ms"

[[mix]]
method = "tools/call"
tool = "echo"
"#,
    );
    let out_dir = dir.join("short-run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.code().is_some(), "{out:?}");
    let ops = ops_of_step(&out_dir, "1");
    let sleep = &ops["sleep"];
    assert!(num(sleep, "requests") > 0.0, "{sleep:?}");
    assert_eq!(num(sleep, "timeouts"), num(sleep, "requests"), "{sleep:?}");
    assert_eq!(num(sleep, "ok"), 0.0, "{sleep:?}");
    let echo = &ops["echo"];
    assert!(num(echo, "ok") > 0.0, "{echo:?}");
    assert_eq!(num(echo, "timeouts"), 0.0, "{echo:?}");

    // The other way round: a load timeout shorter than the slow entry's calls, the entry's
    // own longer; the drain waits for it, so none of its calls times out.
    let p = profile(
        &dir,
        "long",
        r#"
[target]
builtin = {}

[load]
concurrency = [1]
duration = "500ms"
warmup = "0s"
timeout = "100ms"

[[mix]]
method = "tools/call"
tool = "sleep"
args = { ms = 300 }
timeout = "3s"
"#,
    );
    let out_dir = dir.join("long-run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = &steps(&out_dir)[0];
    assert!(num(s, "requests") >= 1.0, "{s:?}");
    assert_eq!(num(s, "ok"), num(s, "requests"), "{s:?}");
    assert_eq!(num(s, "timeouts"), 0.0, "{s:?}");

    // A zero timeout is refused, naming the field.
    let p = profile(
        &dir,
        "zero",
        "[target]\nbuiltin = {}\n\n[[mix]]\nmethod = \"tools/call\"\ntool = \"echo\"\ntimeout = \"0s\"\n",
    );
    let out = run(&[p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("field `mix.timeout`: must be more than 0s"),
        "{err}"
    );
}

/// A `tools/call` of a tool the server does not list is warned about before the run, naming
/// the tools it does list; a listed tool is not.
#[test]
fn a_tool_the_server_does_not_list_is_warned_about() {
    let dir = scratch("run-ops-unlisted");
    let run_with = |tool: &str| {
        let out = crate::support::bin()
            .args([
                "run",
                "--quiet",
                "--builtin",
                "--tool",
                tool,
                "-c",
                "1",
                "-d",
                "1s",
            ])
            .args(["--warmup", "0s", "--out"])
            .arg(dir.join(tool))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = run_with("ehco");
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("mcpload: warning: tool ehco is not among the"))
        .unwrap_or_else(|| panic!("no warning:\n{stderr}"));
    assert!(warning.contains("echo"), "{warning}");
    let stderr = run_with("echo");
    assert!(!stderr.contains("is not among"), "{stderr}");
}
