//! The TypeScript "everything" server (npm, pinned) over Streamable HTTP and stdio: era
//! detection falls back to `initialize`, tools are listed, 1 000 `tools/call` with 64 in
//! flight all pair, progress notifications on an SSE stream are counted, and a session it
//! no longer knows (it answers 400, "No valid session ID provided") is opened anew.

use crate::support::load::*;
use crate::support::machine;
use crate::support::scratch::scratch;
use crate::support::servers::*;
use mcpload::client::{ConnectOptions, Connector, Endpoint, Era, Revision};
use mcpload::transport::{AnyTransport, Transport};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

async fn load_echo(connector: &Connector) -> (Outcome, mcpload::client::Connected) {
    let mut conn = connector.connect().await.expect("connect");
    let s = &conn.server;
    assert_eq!(s.era, Era::Legacy);
    assert_eq!(s.revision, Revision::V2025_11_25);
    assert!(
        s.detection.starts_with("server/discover"),
        "{}",
        s.detection
    );
    let echo = s.tool("echo").expect("echo is listed");
    assert_eq!(echo.required, vec!["message".to_string()]);
    assert!(s.tool("get-sum").is_some_and(|t| t.required == ["a", "b"]));
    let op = s
        .operation(
            "tools/call",
            Some(&json!({"name": "echo", "arguments": {"message": "hi"}})),
        )
        .unwrap();
    let out = drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| op.request(id)).await;
    (out, conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_http_pairs_1000_calls_with_a_session() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    let connector = Connector::new(
        Endpoint::http(&server.url, vec![]),
        ConnectOptions::default(),
    )
    .unwrap();
    let (out, mut conn) = load_echo(&connector).await;
    assert!(
        conn.server.session,
        "the everything server issues a session id"
    );
    assert_all_ok(&out.counters, 1000);
    assert_eq!(out.counters.in_flight_max, 64);
    assert_eq!(out.counters.reinitializations, 0);

    // trigger-long-running-operation reports progress on the call's SSE stream when given a
    // progress token: counted as server messages and as progress notifications.
    let op = conn
        .server
        .operation(
            "tools/call",
            Some(&json!({"name": "trigger-long-running-operation",
                         "arguments": {"duration": 0.2, "steps": 4},
                         "_meta": {"progressToken": "p"}})),
        )
        .unwrap();
    let out = drive(&mut conn.transport, 3, 3, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 3);
    assert_eq!(
        out.counters.progress_notifications, 12,
        "{:?}",
        out.counters
    );
    assert_eq!(out.counters.server_messages, 12);

    // Batches are answered over SSE, one event per response: all pair, counts match.
    let op = conn
        .server
        .operation(
            "tools/call",
            Some(&json!({"name": "echo", "arguments": {"message": "b"}})),
        )
        .unwrap();
    let c = drive_batches(&mut conn.transport, 20, 5, TIMEOUT, |out, id| {
        op.stamp(out, id)
    })
    .await;
    assert_identity(&c);
    assert_eq!(
        (c.batches, c.ok, c.response_count_mismatch),
        (20, 100, 0),
        "{c:?}"
    );

    // A second worker attaches with its own session, without listing tools again.
    let mut other = connector.attach(&conn.server).await.unwrap();
    let op = conn
        .server
        .operation(
            "tools/call",
            Some(&json!({"name": "get-sum", "arguments": {"a": 1, "b": 2}})),
        )
        .unwrap();
    let out = drive(&mut other, 100, 16, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 100);
    other.close().await;
    conn.transport.close().await;
}

/// The server answers a request whose session it does not know with HTTP 400 and an error
/// without id, "Bad Request: No valid session ID provided": the session is gone, so a new
/// one is opened, and each refused request (ended `http_other`, its refusal no message) is
/// sent again in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_http_a_forgotten_session_is_opened_anew_on_its_400() {
    let _share = machine::loading();
    let server = start_http(&everything_cmd("streamableHttp"));
    let connector = Connector::new(
        Endpoint::http(&server.url, vec![]),
        ConnectOptions::default(),
    )
    .unwrap();
    let mut conn = connector.connect().await.expect("connect");
    let op = (conn.server)
        .operation(
            "tools/call",
            Some(&json!({"name": "echo", "arguments": {"message": "hi"}})),
        )
        .unwrap();
    let AnyTransport::Http(h) = &conn.transport else {
        panic!("an HTTP transport")
    };
    let session = h.session().unwrap().to_str().unwrap().to_owned();
    let status = session_request("DELETE", &server.url, &session, "").await;
    assert!((200..300).contains(&status), "{status}");
    let out = drive(&mut conn.transport, 100, 4, TIMEOUT, |id| op.request(id)).await;
    let c = &out.counters;
    assert_identity(c);
    // At most the calls in flight went out in the forgotten session.
    assert!((1..=4).contains(&c.session_lost), "{c:?}");
    assert_eq!(c.http_other, c.session_lost, "{c:?}");
    assert_eq!(c.retries_session, c.session_lost, "{c:?}");
    assert_eq!((c.ok, c.requests), (100, 100 + c.session_lost), "{c:?}");
    assert_eq!(c.reinitializations, 1, "{c:?}");
    assert_eq!(c.anomalies(), 0, "{c:?}");
    conn.transport.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_pairs_1000_calls() {
    let _share = machine::loading();
    let cmd = everything_cmd("stdio");
    let dir = scratch("everything-stdio");
    let mut target = Endpoint::stdio(&line(&cmd)).unwrap();
    if let Endpoint::Stdio(o) = &mut target {
        o.stderr = Some(dir.join("stderr.txt"));
    }
    let connector = Connector::new(target, ConnectOptions::default()).unwrap();
    let (out, mut conn) = load_echo(&connector).await;
    assert!(matches!(conn.transport, AnyTransport::Stdio(_)));
    assert!(!conn.server.session);
    assert_all_ok(&out.counters, 1000);
    conn.transport.close().await;
    let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap();
    assert!(
        stderr.contains("STDIO"),
        "the child's stderr is saved: {stderr:?}"
    );
}
