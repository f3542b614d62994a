//! The official MCP conformance harness (npm `@modelcontextprotocol/conformance`, pinned in
//! tests/conformance) runs its client scenarios with mcpload as the client: one test per
//! scenario that applies to a load tool. The harness starts the scenario's server on loopback
//! and runs tests/conformance/mcpload-client.mjs, the wrapper a user would write, which turns
//! the scenario's context into `mcpload run` commands; each test asserts the harness's checks
//! passed and that mcpload exited 0, with the harness's failure text in the message.

use crate::support::installed::installed;
use crate::support::run::watch;
use crate::support::scratch::scratch;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long the harness may give the client (its `--timeout`): a 1 s run, its handshake and
/// its drain, with room for a loaded machine.
const CLIENT_TIMEOUT_MS: u64 = 60_000;
/// How long one scenario may take in all before the harness is killed.
const SCENARIO_BUDGET: Duration = Duration::from_secs(180);

/// A check of the harness that the test tolerates: `sse-retry` warns (not fails: "acceptable
/// but may indicate network delays") when the reconnect came up to twice the `retry` late,
/// which a busy machine causes, not the client. Reconnecting early still fails.
const TIMING_WARNING: &str = "client-sse-retry-timing";

/// Runs the harness's client scenario `name` against the debug mcpload and asserts it passed.
fn scenario(name: &str) {
    let dir = installed("conformance");
    let node = dir.join("node_modules/.bin/node");
    let harness = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let wrapper = dir.join("mcpload-client.mjs");
    // The harness's scenario servers listen on every interface: bind them to 127.0.0.1.
    let loopback =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop_servers/force_loopback.cjs");
    let work = scratch(&format!("conformance-{}", name.replace('/', "-")));
    // The harness splits its --command at spaces.
    let client = format!("{} {}", node.display(), wrapper.display());
    assert!(
        !client.contains("  ") && client.split(' ').count() == 2,
        "the harness splits --command at spaces: {client:?} must have none in its paths"
    );
    let mut harness_run = Command::new(&node);
    harness_run
        .arg("-r")
        .arg(&loopback)
        .arg(&harness)
        .args(["client", "--scenario", name, "--command", &client])
        .args(["--timeout", &CLIENT_TIMEOUT_MS.to_string()])
        .arg("--output-dir")
        .arg(work.join("results"))
        .env("MCPLOAD", env!("CARGO_BIN_EXE_mcpload"))
        .env("MCPLOAD_CONFORMANCE_DIR", work.join("client"));
    let watched = watch(harness_run, SCENARIO_BUDGET);
    let stderr = String::from_utf8_lossy(&watched.output.stderr);
    assert!(
        !watched.overran,
        "{name}: the harness ran past {SCENARIO_BUDGET:?}\n{stderr}"
    );
    let checks = read_checks(&work.join("results"), &stderr);
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| match c["status"].as_str() {
            Some("FAILURE") => true,
            Some("WARNING") => c["id"] != TIMING_WARNING,
            _ => false,
        })
        .map(|c| {
            format!(
                "{} {} {}: {} {}",
                c["status"].as_str().unwrap_or_default(),
                c["id"].as_str().unwrap_or_default(),
                c["description"].as_str().unwrap_or_default(),
                c["errorMessage"].as_str().unwrap_or_default(),
                c["details"]
            )
        })
        .collect();
    let client_failed =
        stderr.contains("CLIENT EXITED WITH ERROR") || stderr.contains("CLIENT TIMED OUT");
    assert!(
        failed.is_empty() && !client_failed,
        "conformance scenario {name} failed:\n{}\n\nharness:\n{}",
        failed.join("\n"),
        verdict_text(&stderr)
    );
    assert!(
        checks.iter().any(|c| c["status"] == "SUCCESS"),
        "{name}: no check passed\n{stderr}"
    );
}

/// The checks.json the harness wrote under `results` (a folder per scenario, named with the
/// scenario's path and a timestamp).
fn read_checks(results: &Path, stderr: &str) -> Vec<Value> {
    let files = checks_files(results);
    assert_eq!(
        files.len(),
        1,
        "one checks.json in {}: {files:?}\n{stderr}",
        results.display()
    );
    let text = std::fs::read_to_string(&files[0]).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

fn checks_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for path in entries.map(|e| e.unwrap().path()) {
        if path.is_dir() {
            found.extend(checks_files(&path));
        } else if path.file_name().is_some_and(|n| n == "checks.json") {
            found.push(path);
        }
    }
    found
}

/// What the harness said besides its list of every check: the client's output (printed when
/// it exited non-zero) and the results with the failed checks.
fn verdict_text(stderr: &str) -> String {
    let before_checks = stderr.split("\nChecks:").next().unwrap_or_default();
    let results = stderr.find("Test Results:").map_or("", |at| &stderr[at..]);
    format!("{before_checks}\n...\n{results}")
}

#[test]
fn initialize() {
    scenario("initialize");
}

#[test]
fn tools_call() {
    scenario("tools_call");
}

/// The harness's server sends `elicitation/create` with no related request, so on the
/// session's standalone GET stream, which mcpload opens when it declares capabilities
/// (`[input]`); the answer carries the requested schema's defaults (SEP-1034).
#[test]
fn elicitation_sep1034_client_defaults() {
    scenario("elicitation-sep1034-client-defaults");
}

#[test]
fn sse_retry() {
    scenario("sse-retry");
}

#[test]
fn request_metadata() {
    scenario("request-metadata");
}

#[test]
fn sep_2322_client_request_state() {
    scenario("sep-2322-client-request-state");
}

#[test]
fn http_standard_headers() {
    scenario("http-standard-headers");
}

#[test]
fn http_custom_headers() {
    scenario("http-custom-headers");
}

#[test]
fn http_invalid_tool_headers() {
    scenario("http-invalid-tool-headers");
}

#[test]
fn json_schema_ref_no_deref() {
    scenario("json-schema-ref-no-deref");
}

#[test]
fn auth_client_credentials_basic() {
    scenario("auth/client-credentials-basic");
}

#[test]
fn auth_client_credentials_jwt() {
    scenario("auth/client-credentials-jwt");
}

// The authorization code scenarios (issue #30): the wrapper logs in headlessly with `mcpload
// auth login --login-follow-redirects`, then runs with `--oauth-login`.

#[test]
fn auth_metadata_default() {
    scenario("auth/metadata-default");
}

#[test]
fn auth_metadata_var1() {
    scenario("auth/metadata-var1");
}

#[test]
fn auth_metadata_var2() {
    scenario("auth/metadata-var2");
}

#[test]
fn auth_metadata_var3() {
    scenario("auth/metadata-var3");
}

#[test]
fn auth_basic_cimd() {
    scenario("auth/basic-cimd");
}

#[test]
fn auth_scope_from_www_authenticate() {
    scenario("auth/scope-from-www-authenticate");
}

#[test]
fn auth_scope_from_scopes_supported() {
    scenario("auth/scope-from-scopes-supported");
}

#[test]
fn auth_scope_omitted_when_undefined() {
    scenario("auth/scope-omitted-when-undefined");
}

#[test]
fn auth_scope_step_up() {
    scenario("auth/scope-step-up");
}

#[test]
fn auth_scope_retry_limit() {
    scenario("auth/scope-retry-limit");
}

#[test]
fn auth_token_endpoint_auth_basic() {
    scenario("auth/token-endpoint-auth-basic");
}

#[test]
fn auth_token_endpoint_auth_post() {
    scenario("auth/token-endpoint-auth-post");
}

#[test]
fn auth_token_endpoint_auth_none() {
    scenario("auth/token-endpoint-auth-none");
}

#[test]
fn auth_pre_registration() {
    scenario("auth/pre-registration");
}

#[test]
fn auth_v2025_03_26_oauth_metadata_backcompat() {
    scenario("auth/2025-03-26-oauth-metadata-backcompat");
}

#[test]
fn auth_v2025_03_26_oauth_endpoint_fallback() {
    scenario("auth/2025-03-26-oauth-endpoint-fallback");
}

#[test]
fn auth_resource_mismatch() {
    scenario("auth/resource-mismatch");
}

#[test]
fn auth_offline_access_scope() {
    scenario("auth/offline-access-scope");
}

#[test]
fn auth_offline_access_not_supported() {
    scenario("auth/offline-access-not-supported");
}

#[test]
fn auth_authorization_server_migration() {
    scenario("auth/authorization-server-migration");
}

#[test]
fn auth_iss_supported() {
    scenario("auth/iss-supported");
}

#[test]
fn auth_iss_not_advertised() {
    scenario("auth/iss-not-advertised");
}

#[test]
fn auth_iss_supported_missing() {
    scenario("auth/iss-supported-missing");
}

#[test]
fn auth_iss_wrong_issuer() {
    scenario("auth/iss-wrong-issuer");
}

#[test]
fn auth_iss_unexpected() {
    scenario("auth/iss-unexpected");
}

#[test]
fn auth_iss_normalized() {
    scenario("auth/iss-normalized");
}

#[test]
fn auth_metadata_issuer_mismatch() {
    scenario("auth/metadata-issuer-mismatch");
}
