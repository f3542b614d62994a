//! The official Python SDK server (PyPI `mcp`, pinned; tests/interop_servers/py_server.py)
//! over Streamable HTTP in both eras and over stdio: 1 000 calls with 64 in flight pair, a
//! deleted legacy session is re-initialized on 404, a timed-out 2026-07-28 call is cancelled
//! by closing its stream, and answers that come out of order over stdio pair by id.

use crate::support::load::*;
use crate::support::machine;
use crate::support::servers::*;
use mcpload::client::{ConnectOptions, Connector, Endpoint, Era, ProtocolChoice, Revision};
use mcpload::transport::{AnyTransport, Transport};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

fn http(url: &str, protocol: ProtocolChoice) -> Connector {
    let opts = ConnectOptions {
        protocol,
        ..ConnectOptions::default()
    };
    Connector::new(Endpoint::http(url, vec![]), opts).unwrap()
}

fn stdio(protocol: ProtocolChoice) -> Connector {
    let opts = ConnectOptions {
        protocol,
        ..ConnectOptions::default()
    };
    Connector::new(
        Endpoint::stdio(&line(&python_cmd(&["stdio"]))).unwrap(),
        opts,
    )
    .unwrap()
}

fn echo(conn: &mcpload::client::Connected) -> mcpload::client::Operation {
    let s = &conn.server;
    assert_eq!(s.tool("echo").unwrap().required, ["message"]);
    assert_eq!(s.tool("add").unwrap().required, ["a", "b"]);
    s.operation(
        "tools/call",
        Some(&json!({"name": "echo", "arguments": {"message": "hi"}})),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_http_2026_07_28_pairs_cancels_and_counts_progress() {
    let _share = machine::loading();
    let server = start_http(&python_cmd(&["http"]));
    let mut conn = http(&server.url, ProtocolChoice::Auto)
        .connect()
        .await
        .unwrap();
    assert_eq!(conn.server.era, Era::Modern);
    assert_eq!(conn.server.revision, Revision::V2026_07_28);
    assert!(!conn.server.session);
    assert_eq!(conn.server.supported_versions, ["2026-07-28"]);
    let op = echo(&conn);
    let out = drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 1000);

    // Progress notifications come on the call's SSE stream, before its response.
    let op = conn
        .server
        .operation(
            "tools/call",
            Some(&json!({"name": "progress", "arguments": {"steps": 3},
                         "_meta": {"progressToken": "p"}})),
        )
        .unwrap();
    let out = drive(&mut conn.transport, 4, 4, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 4);
    assert_eq!(
        out.counters.progress_notifications, 12,
        "{:?}",
        out.counters
    );

    // Calls that outlive their timeout are cancelled by closing their streams: they end as
    // timeouts, nothing comes late, the streams are gone, and the server still answers.
    let op = conn
        .server
        .operation(
            "tools/call",
            Some(&json!({"name": "sleep", "arguments": {"ms": 3000}})),
        )
        .unwrap();
    let out = drive(
        &mut conn.transport,
        8,
        8,
        Duration::from_millis(300),
        |id| op.request(id),
    )
    .await;
    assert_identity(&out.counters);
    assert_eq!(out.counters.timeouts, 8, "{:?}", out.counters);
    assert_eq!(out.counters.late, 0);
    assert_eq!(conn.transport.open_exchanges(), 0);
    let op = echo(&conn);
    let out = drive(&mut conn.transport, 10, 10, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_http_legacy_session_is_restarted_after_404() {
    let _share = machine::loading();
    let server = start_http(&python_cmd(&["http"]));
    let mut conn = http(&server.url, ProtocolChoice::Pinned(Revision::V2025_11_25))
        .connect()
        .await
        .unwrap();
    assert_eq!(conn.server.era, Era::Legacy);
    assert_eq!(
        conn.server.detection,
        "pinned by --protocol; initialize agreed 2025-11-25"
    );
    assert!(conn.server.session);
    let op = echo(&conn);
    let out = drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 1000);

    // Batches are refused as a whole (HTTP 400, one error): members end as http_other.
    let c = drive_batches(&mut conn.transport, 5, 4, TIMEOUT, |out, id| {
        op.stamp(out, id)
    })
    .await;
    assert_identity(&c);
    assert_eq!(
        (c.batches, c.batch_rejected, c.http_other),
        (5, 5, 20),
        "{c:?}"
    );
    assert_eq!(c.anomalies(), 0, "the refusal itself is no anomaly: {c:?}");

    // End the session behind the transport's back: the server then answers 404, and the
    // transport opens a new session once, holding later requests until it is ready; each
    // request refused for the lost session is sent again in the new one (a new request).
    let AnyTransport::Http(h) = &conn.transport else {
        panic!("an HTTP transport")
    };
    let session = h.session().unwrap().to_str().unwrap().to_owned();
    let status = session_request("DELETE", &server.url, &session, "").await;
    assert!((200..300).contains(&status), "{status}");
    let out = drive(&mut conn.transport, 200, 16, TIMEOUT, |id| op.request(id)).await;
    let c = &out.counters;
    assert_identity(c);
    assert_eq!((c.reinitializations, c.reinit_failed), (1, 0), "{c:?}");
    assert!((1..=16).contains(&c.http_other), "{c:?}");
    assert_eq!(c.session_lost, c.http_other, "{c:?}");
    assert_eq!(c.retries_session, c.http_other, "{c:?}");
    assert_eq!((c.ok, c.requests), (200, 200 + c.http_other), "{c:?}");
    assert_eq!(c.null_id, 0, "the refusal's error is no message: {c:?}");
    let AnyTransport::Http(h) = &conn.transport else {
        unreachable!()
    };
    assert_ne!(h.session().unwrap().to_str().unwrap(), session);

    // At the end the session is deleted: the server no longer knows it.
    let session = h.session().unwrap().to_str().unwrap().to_owned();
    conn.transport.close().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let status = session_request("POST", &server.url, &session, body).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_http_stateless_json_legacy_pairs_1000_calls() {
    let _share = machine::loading();
    let server = start_http(&python_cmd(&["http", "--stateless", "--json"]));
    let mut conn = http(&server.url, ProtocolChoice::Pinned(Revision::V2025_06_18))
        .connect()
        .await
        .unwrap();
    assert_eq!(conn.server.revision, Revision::V2025_06_18);
    assert!(!conn.server.session, "stateless: no session id");
    let op = echo(&conn);
    let out = drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stdio_discovers_2026_07_28_and_pairs_out_of_order_answers() {
    let _share = machine::loading();
    let mut conn = stdio(ProtocolChoice::Auto).connect().await.unwrap();
    assert_eq!(conn.server.revision, Revision::V2026_07_28);
    let op = echo(&conn);
    let out = drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 1000);

    // Calls that sleep 0, 5, 10 or 20 ms: the server answers them as they finish.
    let ops: Vec<_> = [0, 5, 10, 20]
        .iter()
        .map(|ms| {
            conn.server
                .operation(
                    "tools/call",
                    Some(&json!({"name": "sleep", "arguments": {"ms": ms}})),
                )
                .unwrap()
        })
        .collect();
    let out = drive(&mut conn.transport, 400, 64, TIMEOUT, |id| {
        let mcpload::jsonrpc::Id::Num(n) = id else {
            unreachable!()
        };
        ops[n as usize % 4].request(id)
    })
    .await;
    assert_all_ok(&out.counters, 400);
    let mut sorted = out.paired_order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, out.ids.clone().collect::<Vec<i64>>());
    let inversions = out.paired_order.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(
        inversions > 10,
        "answers came out of order: {inversions} inversions"
    );
    conn.transport.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stdio_legacy_handshake_pairs_calls() {
    let _share = machine::loading();
    let mut conn = stdio(ProtocolChoice::Pinned(Revision::V2025_11_25))
        .connect()
        .await
        .unwrap();
    assert_eq!(conn.server.era, Era::Legacy);
    let op = echo(&conn);
    let out = drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| op.request(id)).await;
    assert_all_ok(&out.counters, 1000);
    conn.transport.close().await;
}
