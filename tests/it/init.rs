//! `mcpload init` end to end against the built-in target, the TypeScript everything server
//! and the Python SDK server: the profile it writes parses with the parser `run` uses, places
//! each tool as its annotations, name and probe say (the everything server's 10 s tool, marked
//! read-only, is left out with its reason), gives every loaded tool a timeout, writes no
//! secret, and runs clean at once with a short sweep of its own levels overridden.
//! The calibration's numbers vary on a busy machine: the tests assert the structure and the
//! exclusions, never the levels chosen.

use crate::support::bin;
use crate::support::machine;
use crate::support::run::{num, steps, table};
use crate::support::scratch::scratch;
use crate::support::servers::*;
use mcpload::profile::{Method, Profile, Source, TaskMode};
use std::path::{Path, PathBuf};
use std::process::Output;

/// `mcpload init ARGS -o DIR/mcpload.toml`: its output, and the file.
fn init(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, PathBuf) {
    let file = dir.join("mcpload.toml");
    let out = bin()
        .arg("init")
        .args(args)
        .arg("-o")
        .arg(&file)
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "init {args:?} exited {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, file)
}

/// The profile's text, with each comment's wrapped lines joined (`# a\n# b` reads `# a b`),
/// and the profile as `run` reads it.
fn written(file: &Path) -> (String, Profile) {
    let source = Source::read(file).unwrap();
    let profile = source
        .parse()
        .unwrap_or_else(|e| panic!("{e}\n{}", source.text));
    (source.text.replace("\n# ", " "), profile)
}

/// The tools the mix calls, in order.
fn loaded(p: &Profile) -> Vec<String> {
    p.mix
        .iter()
        .filter_map(|m| m.get_ref().tool.clone())
        .collect()
}

/// Every loaded tool has a timeout of its own, and the sweep starts at 1 and doubles, with
/// two levels past where the calibration's latency doubled (so three at least).
fn assert_timeouts_and_sweep(p: &Profile, text: &str) {
    for m in &p.mix {
        let m = m.get_ref();
        if m.method == Method::ToolsCall {
            let t = m
                .timeout
                .unwrap_or_else(|| panic!("{m:?} has no timeout\n{text}"));
            assert!(t >= std::time::Duration::from_secs(1), "{m:?}");
        }
    }
    let levels = &p
        .load
        .concurrency
        .as_ref()
        .expect("concurrency")
        .get_ref()
        .0;
    assert!(levels.len() >= 3, "{levels:?}");
    assert_eq!(levels[0], 1.0, "{levels:?}");
    for w in levels.windows(2) {
        assert_eq!(w[1], w[0] * 2.0, "{levels:?}");
    }
    assert!(text.contains("Calibration ("), "{text}");
    assert!(text.contains("thresholds = ["), "{text}");
    assert!(text.contains("\"anomalies==0\","), "{text}");
}

/// `mcpload profile check` passes the profile, then it runs at once with a short sweep of
/// its own: no step fails, no call times out, no operation has an error.
fn assert_runs_clean(file: &Path, out_dir: &Path, env: &[(&str, &str)]) {
    let check = bin().args(["profile", "check"]).arg(file).output().unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "profile check: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let out = bin()
        .arg("run")
        .arg("--quiet")
        .arg(file)
        .args(["-c", "1,2", "-d", "1s", "--warmup", "0s", "--out"])
        .arg(out_dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let steps = steps(out_dir);
    assert_eq!(steps.len(), 2, "{stdout}");
    for s in &steps {
        assert_ne!(s["verdict"], "failed", "{stdout}");
        assert_eq!(num(s, "timeouts"), 0.0, "{stdout}");
        assert!(num(s, "ok") > 0.0, "{stdout}");
    }
    for op in table(out_dir, "ops.csv") {
        for c in ["timeouts", "errors", "tool_errors"] {
            assert_eq!(num(&op, c), 0.0, "{c} of {} in {stdout}", op["op"]);
        }
    }
}

#[test]
fn init_against_the_builtin_target_places_probes_and_runs() {
    let _share = machine::loading();
    let dir = scratch("init-builtin");
    // With the tools of SEP-2243: one whose arguments travel in headers, five whose
    // annotations are invalid.
    let (out, file) = init(
        &dir,
        &["--builtin", "--builtin-knob", "header_tools=true"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (text, p) = written(&file);
    let tools = loaded(&p);
    for t in [
        "echo",
        "sleep",
        "counter_read",
        "ask_input",
        "task_only",
        "region_echo",
    ] {
        assert!(
            tools.contains(&t.to_owned()),
            "{t} not loaded: {tools:?}\n{text}"
        );
    }
    // Errors and isError answers are left out by the probe, with the reason; the writes are
    // commented out by their names, never called.
    for (t, why) in [
        ("fail", "LEFT OUT fail: answered a JSON-RPC error"),
        ("tool_error", "LEFT OUT tool_error: answered isError: true"),
        (
            "job_status",
            "LEFT OUT job_status: answered a JSON-RPC error -32602",
        ),
        (
            "counter_add",
            "WARNING: counter_add is not loaded: no annotations, and its name says \"add\"",
        ),
        ("job_start", "WARNING: job_start is not loaded"),
        (
            "bad_header_empty",
            "LEFT OUT bad_header_empty: its x-mcp-header annotations are invalid",
        ),
    ] {
        assert!(!tools.contains(&t.to_owned()), "{t} loaded\n{text}");
        assert!(text.contains(why), "{why}\n{text}");
        assert!(text.contains(&format!(" tool = \"{t}\"")), "{t}\n{text}");
    }
    // Under 2026-07-28 task_only is refused until the call declares the tasks extension: it
    // is set up as a task; ask_input's rounds are answered from [input].
    let task_only = p
        .mix
        .iter()
        .map(|m| m.get_ref())
        .find(|m| m.tool.as_deref() == Some("task_only"));
    assert_eq!(task_only.map(|m| m.task), Some(TaskMode::On), "{text}");
    assert!(text.contains("It runs as a task"), "{text}");
    assert!(p.input.is_some(), "{text}");
    assert!(
        text.contains("ask_input asked for input in the probes"),
        "{text}"
    );
    assert!(text.contains(" uri = \"mem://item/1\""), "{text}");
    assert!(text.contains(" prompt = \"greet\""), "{text}");
    assert!(stdout.contains("left out       fail:"), "{stdout}");
    assert!(
        text.contains("Argument `region` also travels in the Mcp-Param-Region header"),
        "{text}"
    );
    assert_timeouts_and_sweep(&p, &text);
    assert_runs_clean(&file, &dir.join("run"), &[]);

    // The file is there now: init refuses to write over it, before connecting to anything.
    let again = bin()
        .args(["init", "--url", "http://127.0.0.1:9/mcp", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("exists") && err.contains("--force"), "{err}");
}

#[test]
fn init_against_the_everything_server_leaves_out_its_slow_tool_and_no_secret() {
    let _share = machine::loading();
    let dir = scratch("init-everything");
    let server = start_http(&everything_cmd("streamableHttp"));
    let token = [("MCPLOAD_INIT_TOKEN", "t0ken-value")];
    let (out, file) = init(
        &dir,
        &[
            "--url",
            &server.url,
            "-H",
            "X-Api-Key: s3cret-value",
            "--bearer-env",
            "MCPLOAD_INIT_TOKEN",
        ],
        &token,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (text, p) = written(&file);
    let tools = loaded(&p);
    // Marked read-only, but 10 s a call: the probe leaves it out, saying why.
    assert!(
        !tools.contains(&"trigger-long-running-operation".to_owned()),
        "{text}"
    );
    assert!(
        text.contains("LEFT OUT trigger-long-running-operation: ran past the probe"),
        "{text}"
    );
    assert!(
        text.contains("annotations can be wrong, the probe decides"),
        "{text}"
    );
    for t in ["echo", "get-sum"] {
        assert!(tools.contains(&t.to_owned()), "{t}: {tools:?}\n{text}");
    }
    // Annotated as not read-only: commented out with a warning.
    assert!(
        !tools.contains(&"toggle-simulated-logging".to_owned()),
        "{text}"
    );
    assert!(
        text.contains("WARNING: toggle-simulated-logging is not loaded: not read-only"),
        "{text}"
    );
    // No secret: the header's value is a variable, and init says which one to set.
    assert!(!text.contains("s3cret"), "{text}");
    assert_eq!(
        p.target
            .get_ref()
            .headers
            .get("X-Api-Key")
            .map(String::as_str),
        Some("${MCP_HEADER_X_API_KEY}")
    );
    assert!(
        stdout.contains("set MCP_HEADER_X_API_KEY before running"),
        "{stdout}"
    );
    assert!(!text.contains("t0ken"), "{text}");
    assert!(
        text.contains("bearer_env = \"MCPLOAD_INIT_TOKEN\""),
        "{text}"
    );
    assert!(
        stdout.contains("set MCPLOAD_INIT_TOKEN before running"),
        "{stdout}"
    );
    assert_timeouts_and_sweep(&p, &text);
    assert_runs_clean(
        &file,
        &dir.join("run"),
        &[
            ("MCP_HEADER_X_API_KEY", "s3cret-value"),
            ("MCPLOAD_INIT_TOKEN", "t0ken-value"),
        ],
    );
}

#[test]
fn init_against_the_python_sdk_server_over_stdio() {
    let _share = machine::loading();
    let dir = scratch("init-python");
    let cmd = line(&python_cmd(&["stdio"]));
    let (_, file) = init(&dir, &["--stdio", &cmd], &[]);
    let (text, p) = written(&file);
    assert_eq!(p.target.get_ref().stdio.as_deref(), Some(cmd.as_str()));
    let tools = loaded(&p);
    for t in ["echo", "sleep", "progress"] {
        assert!(tools.contains(&t.to_owned()), "{t}: {tools:?}\n{text}");
    }
    // No annotations, and a name that reads as a write: commented out, never called.
    assert!(!tools.contains(&"add".to_owned()), "{text}");
    assert!(text.contains("WARNING: add is not loaded"), "{text}");
    assert_timeouts_and_sweep(&p, &text);
    assert_runs_clean(&file, &dir.join("run"), &[]);
}

#[test]
fn init_falls_back_to_tools_list_when_no_tool_qualifies() {
    let _share = machine::loading();
    let dir = scratch("init-fallback");
    // Every request takes 500 ms, more than the probe allows a call: every tool is left out.
    let (out, file) = init(
        &dir,
        &[
            "--builtin",
            "--builtin-knob",
            "service_ms=500",
            "--probe-timeout",
            "200ms",
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (text, p) = written(&file);
    assert!(p.target.get_ref().builtin.is_some(), "{text}");
    assert!(text.contains("builtin = { service_ms = 500 }"), "{text}");
    assert!(loaded(&p).is_empty(), "{text}");
    let methods: Vec<Method> = p.mix.iter().map(|m| m.get_ref().method).collect();
    assert_eq!(methods, [Method::ToolsList], "{text}");
    assert!(
        text.contains("LEFT OUT echo: ran past the probe:") && text.contains("within 200ms"),
        "{text}"
    );
    assert!(
        text.contains("No tool qualified (above): the mix is tools/list"),
        "{text}"
    );
    assert!(
        stdout.contains("sweep          concurrency 1, 2, 4"),
        "{stdout}"
    );
    assert_runs_clean(&file, &dir.join("run"), &[]);
}
