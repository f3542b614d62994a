//! Authorization against a real SDK: the official Python SDK (PyPI `mcp`) as a protected
//! resource (its own RFC 9728 metadata and 401 challenges, the required scope), its tokens
//! issued by `mcpload serve --auth` and checked there by introspection. mcpload finds the
//! authorization server from the SDK's 401 alone, fetches one token, and loads the SDK's
//! `echo` with it; the authorization server's counts are the ground truth.

use crate::support::bin;
use crate::support::installed::installed;
use crate::support::run::{num, steps, summary, watch};
use crate::support::scratch::scratch;
use crate::support::servers::{serve_cmd, start_http, target_stats};
use serde_json::Value;
use std::time::Duration;

const SECRET: &str = "it-interop-secret-81c3";

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

#[test]
fn the_python_sdks_protected_server_is_discovered_and_loaded() {
    let mut as_cmd = vec!["env".to_owned(), format!("MCPLOAD_CLIENT_SECRET={SECRET}")];
    as_cmd.extend(serve_cmd(&["--auth", "--auth-resource", "*"]));
    let authorization = start_http(&as_cmd);
    let issuer = authorization.url.trim_end_matches("/mcp").to_owned();
    let d = installed("interop_servers");
    let python = start_http(&[
        d.join(".venv/bin/python").display().to_string(),
        d.join("py_protected.py").display().to_string(),
        issuer,
    ]);
    let out = scratch("auth_python").join("run");
    let mut run = bin();
    run.env("AUTH_IT_SECRET", SECRET)
        .args(["run", "--quiet", "--url", &python.url, "--tool", "echo"])
        .args(["--args", r#"{"message":"hi"}"#])
        .args(["--oauth-client-id", "mcpload"])
        .args(["--oauth-client-secret-env", "AUTH_IT_SECRET"])
        .args(["-c", "4", "-d", "2s", "--warmup", "0s", "--workers", "1"])
        .args(["--out", out.to_str().unwrap()]);
    let run = watch(run, Duration::from_secs(90));
    assert!(
        run.output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&run.output.stdout),
        String::from_utf8_lossy(&run.output.stderr)
    );
    let r = &steps(&out)[0];
    assert!(num(r, "ok") > 0.0, "{r:?}");
    assert_eq!(num(r, "requests"), num(r, "ok"), "{r:?}");
    assert_eq!(num(r, "http_401"), 0.0);
    let stats = target_stats(&authorization.url);
    // One token, found from the SDK's 401: its metadata named this authorization server.
    assert_eq!(u(&stats, "/auth/tokens_issued"), 1, "{stats}");
    assert_eq!(u(&summary(&out), "/auth/token_requests"), 1);
    assert_eq!(
        u(&stats, "/auth/metadata_served"),
        1,
        "the AS metadata only"
    );
    // The SDK checked every request's token with it.
    assert!(
        u(&stats, "/auth/introspections") as f64 >= num(r, "ok"),
        "{stats}"
    );
}
