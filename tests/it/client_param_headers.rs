//! Custom parameter headers (2026-07-28, SEP-2243) against `mcpload serve --header-tools`:
//! the client reads `x-mcp-header` annotations, mirrors the arguments into `Mcp-Param-*`
//! headers (rendered per request when the argument is templated) and never calls a tool
//! whose annotation is invalid; the server refuses a header that disagrees with the body,
//! and its `/stats` is the ground truth.

use crate::support::http_client::*;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::*;
use mcpload::client::{ConnectOptions, Connector, Endpoint, ProtocolChoice};
use mcpload::server::{ServeConfig, start_http as start_builtin};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_annotations_are_found_with_their_reason() {
    let server = serve(&["--header-tools"]);
    let opts = ConnectOptions {
        protocol: ProtocolChoice::Auto,
        ..ConnectOptions::default()
    };
    let conn = tokio::time::timeout(
        Duration::from_secs(60),
        Connector::new(Endpoint::http(&server.url, vec![]), opts)
            .unwrap()
            .connect(),
    )
    .await
    .expect("connecting is bounded")
    .unwrap();
    let region = conn.server.tool("region_echo").unwrap();
    assert_eq!(region.invalid, None);
    let mut names: Vec<String> = region
        .param_headers
        .iter()
        .map(|h| h.header_name())
        .collect();
    names.sort();
    assert_eq!(names, ["mcp-param-count", "mcp-param-region"]);
    for (tool, why) in [
        ("bad_header_empty", "empty"),
        ("bad_header_number", "type number"),
        ("bad_header_object", "type object"),
        ("bad_header_duplicate", "regardless of case"),
        ("bad_header_chars", "characters a header name cannot hold"),
    ] {
        let t = conn.server.tool(tool).unwrap();
        let reason = t
            .invalid
            .as_deref()
            .unwrap_or_else(|| panic!("{tool} valid"));
        assert!(reason.contains(why), "{tool}: {reason}");
    }
    // The default tool list has none of them.
    assert!(
        conn.server
            .tools
            .iter()
            .all(|t| t.param_headers.is_empty() || t.name == "region_echo")
    );
}

#[tokio::test]
async fn the_server_refuses_a_header_that_disagrees_with_the_body() {
    let t = start_builtin(ServeConfig {
        header_tools: true,
        ..ServeConfig::default()
    })
    .await
    .unwrap();
    let mut c = Conn::open(t.addr()).await;
    let args = json!({"name": "region_echo", "arguments": {"region": "eu", "count": 2}});
    let (mut hs, body) = modern(json!(1), "tools/call", args);
    hs.extend(h(&[("Mcp-Param-Region", "eu"), ("mcp-param-count", "2")]));
    let ok = c.post(&hs, &body).await;
    assert_eq!(ok.status, 200, "{}", ok.json());
    assert!(ok.json()["result"].is_object());
    let (mut hs, body) = modern(
        json!(2),
        "tools/call",
        json!({"name": "region_echo", "arguments": {"region": "eu", "count": 2}}),
    );
    hs.extend(h(&[("mcp-param-region", "us"), ("mcp-param-count", "2")]));
    let wrong = c.post(&hs, &body).await;
    assert_eq!(wrong.status, 400);
    assert_eq!(wrong.json()["error"]["code"], -32020);
    // An argument in the body without its header is refused too.
    let (hs, body) = modern(
        json!(3),
        "tools/call",
        json!({"name": "region_echo", "arguments": {"region": "eu"}}),
    );
    assert_eq!(c.post(&hs, &body).await.status, 400);
    let stats = c.stats().await;
    assert_eq!(stats["param_header_checks"], 3, "{stats}");
    assert_eq!(stats["param_header_mismatches"], 2, "{stats}");
}

#[test]
fn a_run_mirrors_templated_arguments_and_never_calls_invalid_tools() {
    let server = serve(&["--header-tools"]);
    let dir = scratch("param-headers-run");
    let p = profile(
        &dir,
        "param-headers",
        &short_run(
            &server.url,
            r#"
[[mix]]
method = "tools/call"
tool = "region_echo"
args = { region = "zone-{{seq}}-é", count = "{{rand:1..9}}" }

[[mix]]
method = "tools/call"
tool = "*"
"#,
        ),
    );
    let out_dir = dir.join("run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tool bad_header_empty skipped, never called"),
        "{stderr}"
    );
    let stats = target_stats(&server.url);
    let ops = &stats["operations"];
    let region = &ops["region_echo"];
    let calls = region["requests"].as_u64().unwrap();
    assert!(calls > 0, "{stats}");
    // Every call of region_echo was checked, none disagreed, every one answered well.
    assert_eq!(stats["param_header_checks"], calls, "{stats}");
    assert_eq!(stats["param_header_mismatches"], 0, "{stats}");
    assert_eq!(region["answered_ok"], calls, "{stats}");
    for bad in [
        "bad_header_empty",
        "bad_header_number",
        "bad_header_object",
        "bad_header_duplicate",
        "bad_header_chars",
    ] {
        assert!(ops.get(bad).is_none(), "{bad} was called: {stats}");
    }
    let s = summary(&out_dir);
    let skipped = s["settings"]["skipped_tools"].as_array().unwrap();
    assert_eq!(skipped.len(), 5, "{skipped:?}");
    assert!(
        skipped
            .iter()
            .all(|t| !t["reason"].as_str().unwrap().is_empty())
    );
}

#[test]
fn a_null_argument_is_sent_as_null_without_its_header() {
    let server = serve(&["--header-tools"]);
    let dir = scratch("param-headers-null");
    let out_dir = dir.join("run");
    let out = run(&[
        "--url",
        &server.url,
        "--tool",
        "region_echo",
        "--args",
        r#"{"region":"eu","count":null,"message":"hi"}"#,
        "-c",
        "1",
        "-d",
        "300ms",
        "--warmup",
        "0s",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stats = target_stats(&server.url);
    let region = &stats["operations"]["region_echo"];
    let calls = region["requests"].as_u64().unwrap();
    assert!(calls > 0, "{stats}");
    // Every call was checked: Mcp-Param-Region sent, no Mcp-Param-Count for the null.
    assert_eq!(stats["param_header_checks"], calls, "{stats}");
    assert_eq!(stats["param_header_mismatches"], 0, "{stats}");
    assert_eq!(region["answered_ok"], calls, "{stats}");
}

/// A captured null used as a whole argument value (`"{{var.NAME}}"`) reaches the next
/// request as `null`, without its `Mcp-Param-*` header; an empty CSV cell used so stays the
/// text `""` (a cell is text), with its header. `region_echo` answers the arguments it got
/// (`structuredContent.arguments`), and the target checks every call's headers.
#[test]
fn a_captured_null_is_sent_as_null_and_an_empty_cell_as_empty_text() {
    let server = serve(&["--header-tools"]);
    let dir = scratch("param-headers-capture-null");
    std::fs::write(dir.join("rows.csv"), "region,note\neu,\nus,x\n").unwrap();
    let p = profile(
        &dir,
        "capture-null",
        &short_run(
            &server.url,
            r#"
[[scenario]]
name = "nulls"
csv = "rows.csv"

  [[scenario.step]]
  name = "first"
  call = { method = "tools/call", tool = "region_echo", args = { region = "eu" } }
  capture = { none = "result.structuredContent.count" }

  [[scenario.step]]
  name = "again"
  call = { method = "tools/call", tool = "region_echo", args = { region = "{{csv:note}}", count = "{{var.none}}" } }
  capture = { count = "result.structuredContent.arguments.count", region = "result.structuredContent.arguments.region" }

  [[scenario.step]]
  name = "check"
  expect = ["var.none == null", "var.count == null", "var.region == '' or var.region == 'x'"]
"#,
        ),
    );
    let out_dir = dir.join("run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let row = table(&out_dir, "scenarios.csv")
        .into_iter()
        .find(|r| r["scenario"] == "nulls" && r["part"] == "*")
        .expect("a scenarios.csv row for nulls");
    // Every iteration saw null come back as null (not "null", not dropped: the capture
    // would find nothing) and the cell as text.
    assert!(num(&row, "completed") > 0.0, "{row:?}");
    assert_eq!(num(&row, "failed"), 0.0, "{row:?}");
    let stats = target_stats(&server.url);
    let calls = stats["operations"]["region_echo"]["requests"]
        .as_u64()
        .unwrap();
    assert!(calls > 0, "{stats}");
    // Every call was checked: no Mcp-Param-Count for the null, Mcp-Param-Region sent for
    // the empty cell as for any text.
    assert_eq!(stats["param_header_checks"], calls, "{stats}");
    assert_eq!(stats["param_header_mismatches"], 0, "{stats}");
}

/// A profile of two users for 500 ms against `url`, with `body` (its mix or scenarios).
fn short_run(url: &str, body: &str) -> String {
    format!(
        r#"
[target]
url = "{url}"

[load]
concurrency = [2]
duration = "500ms"
warmup = "0s"
timeout = "5s"
{body}"#
    )
}
