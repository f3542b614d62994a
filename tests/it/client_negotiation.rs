//! Agreeing on a revision with a 2026-07-28 server that does not implement `server/discover`
//! (`mcpload serve --no-discover`, which answers it -32601): a pinned 2026-07-28 is spoken
//! anyway; `auto` goes discover, then `initialize`, then 2026-07-28 without discovery, and
//! the run's summary.json names each attempt and its answer.

use crate::support::load::*;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::*;
use mcpload::client::{
    Attempt, ConnectOptions, Connected, Connector, Endpoint, Era, ProtocolChoice, Revision,
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

async fn connect(url: &str, protocol: ProtocolChoice) -> Connected {
    let opts = ConnectOptions {
        protocol,
        ..ConnectOptions::default()
    };
    tokio::time::timeout(
        Duration::from_secs(60),
        Connector::new(Endpoint::http(url, vec![]), opts)
            .unwrap()
            .connect(),
    )
    .await
    .expect("connecting is bounded")
    .unwrap()
}

/// 200 echo calls over the connection, every one answered.
async fn echoes_all_answered(conn: &mut Connected) {
    let op = conn
        .server
        .operation(
            "tools/call",
            Some(&json!({"name": "echo", "arguments": {"message": "hi"}})),
        )
        .unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        drive(&mut conn.transport, 200, 8, TIMEOUT, |id| op.request(id)),
    )
    .await
    .expect("the load is bounded");
    assert_all_ok(&out.counters, 200);
}

fn sent(tried: &[Attempt]) -> Vec<&str> {
    tried.iter().map(|a| a.sent.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_2026_07_28_is_spoken_without_server_discover() {
    let server = serve(&["--era", "modern", "--no-discover"]);
    let mut conn = connect(&server.url, ProtocolChoice::Pinned(Revision::V2026_07_28)).await;
    assert_eq!(
        (conn.server.era, conn.server.revision),
        (Era::Modern, Revision::V2026_07_28)
    );
    let tried = &conn.server.negotiation;
    assert_eq!(sent(tried), ["server/discover"]);
    assert!(tried[0].answered.contains("-32601"), "{tried:?}");
    assert!(conn.server.tool("echo").is_some());
    echoes_all_answered(&mut conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_to_2026_07_28_when_initialize_is_refused() {
    let server = serve(&["--era", "modern", "--no-discover"]);
    let mut conn = connect(&server.url, ProtocolChoice::Auto).await;
    assert_eq!(conn.server.revision, Revision::V2026_07_28);
    let tried = &conn.server.negotiation;
    assert_eq!(
        sent(tried),
        [
            "server/discover",
            "initialize 2025-11-25",
            "tools/list 2026-07-28"
        ],
        "{tried:?}"
    );
    assert!(tried[0].answered.contains("-32601"), "{tried:?}");
    // A 2026-07-28-only server refuses the legacy version.
    assert!(tried[1].answered.contains("-32022"), "{tried:?}");
    assert_eq!(tried[2].answered, "answered with a result");
    assert!(conn.server.tool("echo").is_some());
    echoes_all_answered(&mut conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_the_same_way_over_stdio() {
    let cmd = serve_cmd(&["--stdio", "--era", "modern", "--no-discover"]).join(" ");
    let opts = ConnectOptions {
        protocol: ProtocolChoice::Auto,
        ..ConnectOptions::default()
    };
    let mut conn = tokio::time::timeout(
        Duration::from_secs(60),
        Connector::new(Endpoint::stdio(&cmd).unwrap(), opts)
            .unwrap()
            .connect(),
    )
    .await
    .expect("connecting is bounded")
    .unwrap();
    assert_eq!(conn.server.revision, Revision::V2026_07_28);
    assert_eq!(
        sent(&conn.server.negotiation),
        [
            "server/discover",
            "initialize 2025-11-25",
            "tools/list 2026-07-28"
        ]
    );
    echoes_all_answered(&mut conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_takes_initialize_before_2026_07_28_without_discovery() {
    // Both eras, no discover: initialize answers, so the legacy era is agreed.
    let server = serve(&["--no-discover"]);
    let conn = connect(&server.url, ProtocolChoice::Auto).await;
    assert_eq!(conn.server.revision, Revision::V2025_11_25);
    assert_eq!(
        sent(&conn.server.negotiation),
        ["server/discover", "initialize"]
    );
    assert_eq!(conn.server.negotiation[1].answered, "agreed 2025-11-25");
}

#[test]
fn the_summary_records_what_was_tried_and_what_each_answered() {
    let dir = scratch("negotiation-summary");
    let p = profile(
        &dir,
        "no-discover",
        r#"
[target]
builtin = { era = "modern", discover = false }

[load]
concurrency = [1]
duration = "300ms"
warmup = "0s"
timeout = "5s"

[[mix]]
method = "tools/call"
tool = "echo"
args = { message = "hi" }
"#,
    );
    let out_dir = dir.join("run");
    let out = run(&[p.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success());
    let s = summary(&out_dir);
    let agreed = &s["settings"]["protocol_agreed"];
    assert_eq!(agreed["revision"], "2026-07-28", "{agreed}");
    let tried: Vec<(&str, &str)> = agreed["tried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["sent"].as_str().unwrap(), a["answered"].as_str().unwrap()))
        .collect();
    assert_eq!(tried.len(), 3, "{agreed}");
    assert_eq!(tried[0].0, "server/discover");
    assert!(tried[0].1.contains("-32601"), "{agreed}");
    assert_eq!(
        tried[2],
        ("tools/list 2026-07-28", "answered with a result")
    );
}

/// A 2026-07-28 server that refuses the first `server/discover` with HTTP 400, -32022 and
/// `data.supported = ["2026-07-28"]` (`--discover-refusals 1`): mcpload retries with that
/// revision, never sends the legacy `initialize`, and records both attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_32022_naming_2026_07_28_is_retried_with_it_not_with_initialize() {
    let server = serve(&["--era", "modern", "--discover-refusals", "1"]);
    let mut conn = connect(&server.url, ProtocolChoice::Auto).await;
    assert_eq!(
        (conn.server.era, conn.server.revision),
        (Era::Modern, Revision::V2026_07_28)
    );
    let tried = &conn.server.negotiation;
    assert_eq!(tried.len(), 2, "{tried:?}");
    assert_eq!(tried[0].sent, "server/discover");
    assert!(tried[0].answered.contains("-32022"), "{tried:?}");
    assert!(
        tried[1].sent.starts_with("server/discover 2026-07-28"),
        "{tried:?}"
    );
    assert!(
        tried.iter().all(|a| !a.sent.starts_with("initialize")),
        "{tried:?}"
    );
    echoes_all_answered(&mut conn).await;
    let stats = target_stats(&server.url);
    assert_eq!(stats["discover_refused"], 1, "{stats}");
    assert!(stats["operations"].get("initialize").is_none(), "{stats}");
    assert_eq!(
        stats["operations"]["server/discover"]["requests"], 2,
        "{stats}"
    );
}

/// Refused every time: 2026-07-28 is spoken without discovery, still never `initialize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_32022_naming_2026_07_28_twice_speaks_it_without_discovery() {
    let server = serve(&["--era", "modern", "--discover-refusals", "2"]);
    let mut conn = connect(&server.url, ProtocolChoice::Auto).await;
    assert_eq!(conn.server.revision, Revision::V2026_07_28);
    let tried = &conn.server.negotiation;
    let sent: Vec<&str> = sent(tried);
    assert_eq!(sent.len(), 3, "{tried:?}");
    assert_eq!(sent[2], "tools/list 2026-07-28", "{tried:?}");
    assert!(tried[1].answered.contains("-32022"), "{tried:?}");
    echoes_all_answered(&mut conn).await;
    let stats = target_stats(&server.url);
    assert_eq!(stats["discover_refused"], 2);
    assert!(stats["operations"].get("initialize").is_none(), "{stats}");
}
