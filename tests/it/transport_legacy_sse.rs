//! The legacy HTTP+SSE transport (2024-11-05) against ground truth: `mcpload serve
//! --legacy-sse` with every fault knob on and sessions ended on purpose, so that each class
//! of docs/metrics.md, the sessions lost and retried, and the requests left unanswered
//! (`missing` when their stream ended, `timeouts` otherwise) equal the target's own counts; auto-detection, and the error for a URL that
//! speaks neither transport; the Python SDK's `sse` transport under load.

use crate::run_faults::{FAULTS, KINDS};
use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{python_cmd, serve, start_http, target_stats};
use serde_json::Value;

/// The stream URL of a target whose Streamable HTTP endpoint is `mcp_url`.
fn sse_url(mcp_url: &str) -> String {
    mcp_url.replace("/mcp", "/sse")
}

/// Half a second of echo calls from two clients at `target` (`--url URL` or `--stdio CMD`).
fn echo_briefly(target: &[&str], out_dir: &std::path::Path) -> std::process::Output {
    echo_with(target, "2", out_dir)
}

/// [`echo_briefly`] with `clients` virtual users.
fn echo_with(target: &[&str], clients: &str, out_dir: &std::path::Path) -> std::process::Output {
    let mut args = target.to_vec();
    args.extend_from_slice(&["--tool", "echo", "-c", clients, "--duration", "500ms"]);
    args.extend_from_slice(&["--warmup", "0s", "--out", out_dir.to_str().unwrap()]);
    run(&args)
}

fn get(v: &Value, path: &str) -> f64 {
    v.pointer(path).and_then(Value::as_u64).unwrap_or(0) as f64
}

/// One closed-loop step over the legacy transport against `serve --legacy-sse` with every
/// fault and every 10th request of a session ending it: the step's counts equal the target's.
#[test]
fn counters_are_exact_with_every_fault_and_sessions_ending() {
    let _share = machine::loading();
    let target = serve(&[
        "--legacy-sse",
        "--legacy-sse-end-every",
        "10",
        "--fault",
        FAULTS,
    ]);
    let before = target_stats(&target.url);
    let out_dir = scratch("legacy-sse-faults").join("run");
    let url = sse_url(&target.url);
    let out = run(&[
        "--url",
        &url,
        "--transport",
        "sse",
        "--workers",
        "1",
        "-c",
        "16",
        "--duration",
        "3s",
        "--warmup",
        "0s",
        "--timeout",
        "2s",
        "--keep-going",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = target_stats(&target.url);
    let delta = |path: &str| get(&after, path) - get(&before, path);
    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_identity(row);
    let settings = &summary(&out_dir)["settings"];
    assert_eq!(settings["transport"], "sse");

    // What the target leaves unanswered (dropped, spoiled ids, garbage, cut answers, and
    // the requests that ended their session) ends either way: `missing` when the stream it
    // waited on ends first (every request that ended a session among them), `timeouts` on a
    // stream that goes on.
    let ended = delta("/legacy_sse_ended");
    assert!(ended > 0.0, "no session was ended");
    assert!(
        num(row, "missing") >= ended,
        "missing: {}",
        num(row, "missing")
    );
    // A request slower than its timeout on a busy machine ends `timeouts` too, and its
    // answer is `late`.
    assert_eq!(
        num(row, "missing") + num(row, "timeouts") - num(row, "late"),
        delta("/client_view/missing"),
        "missing and timeouts: {row:?}"
    );
    for col in [
        "errors",
        "both_result_error",
        "invalid_jsonrpc",
        "duplicate_id",
        "unknown_id",
        "null_id",
        "server_messages",
        "parse_errors",
    ] {
        assert_eq!(
            delta(&format!("/client_view/{col}")),
            num(row, col),
            "{col}"
        );
    }
    // The wire faults up to `garbage` (`truncate` on, but it may not fire in this step).
    for kind in &KINDS[..7] {
        assert!(
            delta(&format!("/faults/{kind}")) > 0.0,
            "no {kind} fault fired"
        );
    }

    // A POST that named an ended session was answered 404: `session_lost`, exactly what
    // the target answered so, and a load request refused so ends `http_other` and is
    // retried once in a new session (a new stream and initialize).
    let lost = delta("/unknown_session");
    assert_eq!(num(row, "session_lost"), lost, "session_lost");
    // Each refused load request is retried once: a retry refused again ends there. The
    // rest of the 404s answered cancel notifications and the like.
    let refused_load = num(row, "http_other") - delta("/client_view/http_other");
    assert!(num(row, "retries") > 0.0, "nothing was retried");
    assert!(
        (num(row, "retries")..=lost).contains(&refused_load),
        "{refused_load} load requests refused 404, {} retried, {lost} 404s",
        num(row, "retries")
    );
    let streams = delta("/legacy_sse_streams");
    assert_eq!(
        num(row, "reinitializations") + num(row, "reinit_failed"),
        streams - 1.0,
        "every stream after the first is a session opened anew"
    );
    assert!(num(row, "reinitializations") > 0.0);

    // `ok`: the target's, less the handshake and each re-opened session's initialize,
    // which it served and the step does not count; the attempts refused 404 it never read.
    let served_for_the_step = num(row, "requests") - refused_load;
    let handshakes = delta("/requests_seen") - served_for_the_step;
    // A new session's initialize does not count toward ending it: none fails.
    assert_eq!(num(row, "reinit_failed"), 0.0);
    assert_eq!(
        handshakes,
        2.0 + num(row, "reinitializations"),
        "initialize and tools/list, then one initialize per new session"
    );
    assert_eq!(delta("/client_view/ok") - handshakes, num(row, "ok"), "ok");
}

/// In a closed loop each virtual user has a session of its own (its stream), as real clients
/// do: three users, three streams, and every request answered in its user's session.
#[test]
fn each_virtual_user_has_a_session_of_its_own() {
    let _share = machine::loading();
    let target = serve(&["--legacy-sse"]);
    let before = target_stats(&target.url);
    let out_dir = scratch("legacy-sse-per-user").join("run");
    let url = sse_url(&target.url);
    let out = echo_with(&["--url", &url, "--transport", "sse"], "3", &out_dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = target_stats(&target.url);
    let delta = |path: &str| get(&after, path) - get(&before, path);
    assert_eq!(delta("/legacy_sse_streams"), 3.0, "one stream a user");
    let row = &steps(&out_dir)[0];
    assert_identity(row);
    assert!(num(row, "ok") > 0.0);
    assert_eq!(num(row, "ok"), num(row, "requests"), "{row:?}");
    for col in [
        "duplicate_id",
        "unknown_id",
        "null_id",
        "late",
        "session_lost",
    ] {
        assert_eq!(num(row, col), 0.0, "{col}: {row:?}");
    }
}

/// With `--transport` left at auto, a URL where Streamable HTTP is refused and a GET opens
/// a legacy stream is spoken over the legacy transport; `/mcp` of the same target stays
/// Streamable HTTP.
#[test]
fn auto_detects_the_legacy_transport() {
    let _share = machine::loading();
    let target = serve(&["--legacy-sse"]);
    for (url, transport) in [
        (sse_url(&target.url), "sse"),
        (target.url.clone(), "streamable-http"),
    ] {
        let out_dir = scratch(&format!("legacy-sse-auto-{transport}")).join("run");
        let out = echo_briefly(&["--url", &url], &out_dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let settings = &summary(&out_dir)["settings"];
        assert_eq!(settings["transport"], transport, "{url}");
        let row = &steps(&out_dir)[0];
        assert_identity(row);
        assert_eq!(num(row, "ok"), num(row, "requests"), "{url}");
        let said = stderr.contains("legacy HTTP+SSE transport");
        assert_eq!(said, transport == "sse", "{stderr}");
        if transport == "sse" {
            let detection = settings["protocol_agreed"]["detection"].as_str().unwrap();
            assert!(detection.contains("Streamable HTTP refused"), "{detection}");
            assert_eq!(settings["protocol_agreed"]["revision"], "2025-11-25");
        }
    }
}

/// A URL that is neither: the target without `--legacy-sse` answers 404 to everything at
/// `/sse`. The error names both transports tried.
#[test]
fn a_url_that_is_neither_names_both_transports() {
    let _share = machine::loading();
    let target = serve(&[]);
    let out_dir = scratch("legacy-sse-neither").join("run");
    let out = run(&[
        "--url",
        &sse_url(&target.url),
        "--tool",
        "echo",
        "--duration",
        "500ms",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Streamable HTTP: ") && stderr.contains("legacy HTTP+SSE transport"),
        "{stderr}"
    );
    assert!(stderr.contains("GET answered HTTP 404"), "{stderr}");
}

/// The Python SDK's `sse` transport (PyPI `mcp`, pinned) under a sweep: every call pairs,
/// nothing anomalous, and the knee is found.
#[test]
fn python_sdk_sse_transport_under_a_sweep() {
    let _share = machine::measuring();
    let server = start_http(&python_cmd(&["sse"]));
    let out_dir = scratch("legacy-sse-python").join("run");
    let url = sse_url(&server.url);
    let out = run(&[
        "--url",
        &url,
        "--tool",
        "sleep",
        "--args",
        r#"{"ms": 20}"#,
        "-c",
        "1..64 x2",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--timeout",
        "10s",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let s = summary(&out_dir);
    assert_eq!(s["settings"]["transport"], "sse");
    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 7, "1 to 64, doubling");
    for r in &rows {
        assert_identity(r);
        assert!(num(r, "requests") > 0.0);
        assert_eq!(num(r, "ok"), num(r, "requests"), "{r:?}");
        for col in [
            "duplicate_id",
            "unknown_id",
            "null_id",
            "parse_errors",
            "late",
        ] {
            assert_eq!(num(r, col), 0.0, "{col}: {r:?}");
        }
    }
    // Where the curve bends depends on how fast this machine runs one Python process (it
    // did not bend once, on a quiet machine): the knee is checked against docs/metrics.md's
    // definition on the measured steps, the level before the first `saturated` one.
    let knee = &s["knee"];
    let verdicts: Vec<&str> = rows.iter().map(|r| r["verdict"].as_str()).collect();
    let saturation = (verdicts.iter().position(|v| *v == "saturated"))
        .and_then(|first| first.checked_sub(1))
        .map(|before| num(&rows[before], "concurrency"));
    assert_eq!(
        knee["saturation_point"].as_f64(),
        saturation,
        "{knee} {verdicts:?}"
    );
    assert!(
        knee["peak_throughput_rps"].as_f64().unwrap() > 0.0,
        "{knee}"
    );
}

/// A server that agrees on 2024-11-05 over stdio is spoken to at that revision.
#[test]
fn revision_2024_11_05_is_agreed_over_stdio() {
    let _share = machine::loading();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stdio_2024_11_05.py");
    let out_dir = scratch("legacy-2024-stdio").join("run");
    let command = format!("python3 {}", script.display());
    let out = echo_briefly(&["--stdio", &command], &out_dir);
    assert_eq!(out.status.code(), Some(0));
    let settings = &summary(&out_dir)["settings"];
    assert_eq!(settings["transport"], "stdio");
    assert_eq!(settings["protocol_agreed"]["revision"], "2024-11-05");
    let row = &steps(&out_dir)[0];
    assert_identity(row);
    assert!(num(row, "requests") > 0.0);
    assert_eq!(num(row, "ok"), num(row, "requests"));
}
