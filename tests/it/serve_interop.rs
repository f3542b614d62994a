//! Third-party MCP clients drive the built-in target: the official Python SDK (PyPI `mcp`,
//! both eras: `legacy` = initialize, `auto` = server/discover → 2026-07-28) and the official
//! TypeScript SDK (npm `@modelcontextprotocol/sdk`, legacy era), over HTTP (the real binary)
//! and over stdio (the SDK spawns `mcpload serve --stdio`). They list tools, call them, read a
//! resource, get the prompt and see progress and errors. tests/interop/setup.sh installs the
//! pinned clients first; if it cannot, these tests fail.

use crate::support::http_client::*;
use crate::support::installed::installed;
use crate::support::machine;
use crate::support::servers::{serve, target_stats};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The SDK clients' folder, installed first.
fn interop_dir() -> PathBuf {
    installed("interop")
}

/// Runs a client script and returns the JSON line it printed.
async fn client(program: &Path, args: &[&str]) -> Value {
    let run = tokio::process::Command::new(program)
        .args(args)
        .current_dir(interop_dir())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(DEADLINE, run)
        .await
        .expect("client finished in time")
        .expect("client ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} {args:?} failed\nstdout: {stdout}\nstderr: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("client printed no JSON ({e}): {stdout}"))
}

fn python() -> PathBuf {
    interop_dir().join(".venv/bin/python")
}

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_mcpload")
}

/// The tools listed, but `ask_input`: it is listed under 2026-07-28 only.
fn tools(v: &Value) -> Vec<&str> {
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .filter(|t| *t != "ask_input")
        .collect()
}

/// What both SDKs must have seen, whatever the era and transport.
fn assert_session_worked(v: &Value, who: &str) {
    assert_eq!(
        tools(v),
        [
            "counter_add",
            "counter_read",
            "echo",
            "fail",
            "job_lookup",
            "job_report",
            "job_start",
            "job_status",
            "payload",
            "progress",
            "sleep",
            "slow_task",
            "task_only",
            "tool_error"
        ],
        "{who}: {v}"
    );
    assert_eq!(v["echo"], format!("hello from {who}"), "{v}");
    assert_eq!(v["tool_error"], true, "{v}");
    assert_eq!(v["progress_result"], "done: 3 steps", "{v}");
    assert_eq!(v["item"], "item 7", "{v}");
    assert_eq!(v["prompt"], "Hello, Ada!", "{v}");
    assert_eq!(v["fail_code"], -32042, "{v}");
}

fn progress(v: &Value) -> Vec<u64> {
    v["progress_seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_f64().unwrap() as u64)
        .collect()
}

#[tokio::test]
async fn python_sdk_over_http_in_both_eras() {
    let _share = machine::loading();
    let server = serve(&["--answer", "sse"]);
    let url = server.url.clone();
    let legacy = client(&python(), &["py_client.py", "http", &url, "legacy"]).await;
    assert_eq!(legacy["protocol_version"], "2025-11-25");
    assert_session_worked(&legacy, "python");
    assert_eq!(progress(&legacy), [1, 2, 3]);
    let modern = client(&python(), &["py_client.py", "http", &url, "auto"]).await;
    assert_eq!(modern["protocol_version"], MODERN);
    assert_session_worked(&modern, "python");
    assert_eq!(progress(&modern), [1, 2, 3]);
    // The target saw it all, answered everything, and counted the two failures.
    let stats = target_stats(&url);
    assert_identity(&stats);
    assert_eq!(stats["errors_sent"], 2, "{stats}");
    assert_eq!(stats["sessions_opened"], 1, "{stats}");
    assert_eq!(stats["client_view"]["server_messages"], 6, "{stats}");
    assert_eq!(stats["malformed_received"], 0, "{stats}");
}

#[tokio::test]
async fn python_sdk_over_stdio_in_both_eras() {
    let _share = machine::loading();
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", MODERN)] {
        let v = client(&python(), &["py_client.py", "stdio", binary(), mode]).await;
        assert_eq!(v["protocol_version"], version);
        assert_session_worked(&v, "python");
        assert_eq!(progress(&v), [1, 2, 3]);
    }
}

#[tokio::test]
async fn typescript_sdk_over_http_and_stdio() {
    let _share = machine::loading();
    let node = PathBuf::from("node");
    let server = serve(&["--answer", "sse"]);
    let url = server.url.clone();
    let http = client(&node, &["node_client.mjs", "http", &url]).await;
    assert_eq!(http["protocol_version"], "2025-11-25");
    assert_eq!(http["session"], true);
    assert_session_worked(&http, "node");
    assert_progress_prefix(&progress(&http));
    let stats = target_stats(&url);
    assert_identity(&stats);
    // The server sent all three progress notifications (what the client shows is above).
    assert_eq!(stats["client_view"]["server_messages"], 3, "{stats}");
    // The client ended its session with DELETE.
    assert_eq!(stats["sessions_opened"], 1);
    assert!(stats["http_status"].get("404").is_none(), "{stats}");
    let stdio = client(&node, &["node_client.mjs", "stdio", binary()]).await;
    assert_session_worked(&stdio, "node");
    assert_progress_prefix(&progress(&stdio));
}

/// The TypeScript client handles a notification a tick after it is read, and forgets a
/// call's progress handler as soon as the answer is read: progress that arrives in the same
/// read as the answer, or just before it, is dropped. On a busy machine a read can hold all
/// three. So what it shows is a prefix of the server's progress, in order, never more.
fn assert_progress_prefix(p: &[u64]) {
    assert!(
        p.len() <= 3 && p.iter().zip(1..).all(|(a, b)| *a == b),
        "progress seen {p:?}, want an in-order prefix of [1, 2, 3]"
    );
}
