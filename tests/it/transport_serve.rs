//! mcpload's own target (`mcpload serve`, the binary) in every answer mode and era, and its
//! faults: garbage, truncated SSE, a killed child, a 10 MB answer, refusals, spoiled
//! answers. Every fault is counted where docs/metrics.md puts it; nothing panics or hangs.

use crate::support::load::*;
use crate::support::machine;
use crate::support::servers::*;
use mcpload::client::{
    ConnectOptions, Connected, Connector, Endpoint, Era, ProtocolChoice, Revision,
};
use mcpload::transport::{AnyTransport, StdioOptions, Transport};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

fn opts(protocol: ProtocolChoice) -> ConnectOptions {
    ConnectOptions {
        protocol,
        ..ConnectOptions::default()
    }
}

async fn connect_http(url: &str, o: ConnectOptions) -> Connected {
    Connector::new(Endpoint::http(url, vec![]), o)
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn call(conn: &Connected, tool: &str, args: serde_json::Value) -> mcpload::client::Operation {
    conn.server
        .operation(
            "tools/call",
            Some(&json!({"name": tool, "arguments": args})),
        )
        .unwrap()
}

/// Runs `f` under a generous bound: a hang is a failure, not a stuck test.
async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(180), f)
        .await
        .expect("finished without hanging")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_over_http_pairs_1000_calls_in_every_mode() {
    let _share = machine::loading();
    let modes: [(&[&str], ProtocolChoice, Revision, bool); 4] = [
        (&[], ProtocolChoice::Auto, Revision::V2026_07_28, false),
        (
            &["--answer", "sse"],
            ProtocolChoice::Auto,
            Revision::V2026_07_28,
            false,
        ),
        (
            &["--era", "legacy"],
            ProtocolChoice::Auto,
            Revision::V2025_11_25,
            true,
        ),
        (
            &["--answer", "sse"],
            ProtocolChoice::Pinned(Revision::V2025_06_18),
            Revision::V2025_06_18,
            true,
        ),
    ];
    for (args, protocol, revision, session) in modes {
        let server = serve(args);
        let mut conn = connect_http(&server.url, opts(protocol)).await;
        assert_eq!(conn.server.revision, revision, "{args:?}");
        assert_eq!(conn.server.session, session, "{args:?}");
        assert_eq!(conn.server.tool("sleep").unwrap().required, ["ms"]);
        let op = call(&conn, "echo", json!({"message": "hi"}));
        let out = bounded(drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| {
            op.request(id)
        }))
        .await;
        assert_all_ok(&out.counters, 1000);
        conn.transport.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_legacy_call_is_cancelled_and_its_answer_counted_late() {
    // The target finishes a call whatever the cancel says: the answer comes late.
    let server = serve(&["--era", "legacy"]);
    let mut conn = connect_http(&server.url, opts(ProtocolChoice::Auto)).await;
    let op = call(&conn, "sleep", json!({"ms": 600}));
    let out = bounded(drive_lingering(
        &mut conn.transport,
        4,
        4,
        Duration::from_millis(150),
        Duration::from_secs(2),
        |id| op.request(id),
    ))
    .await;
    let c = &out.counters;
    assert_identity(c);
    assert_eq!((c.timeouts, c.late, c.ok), (4, 4, 0), "{c:?}");
    // Each cancel was a notification POST the target accepted; the transport is idle again.
    assert_eq!(conn.transport.open_exchanges(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_over_stdio_pairs_out_of_order_answers() {
    let _share = machine::loading();
    let cmd = serve_cmd(&["--stdio", "--service-ms", "uniform:0..20"]);
    for protocol in [
        ProtocolChoice::Auto,
        ProtocolChoice::Pinned(Revision::V2025_11_25),
    ] {
        let connector =
            Connector::new(Endpoint::stdio(&line(&cmd)).unwrap(), opts(protocol)).unwrap();
        let mut conn = connector.connect().await.unwrap();
        let era = if protocol == ProtocolChoice::Auto {
            Era::Modern
        } else {
            Era::Legacy
        };
        assert_eq!(conn.server.era, era);
        let op = call(&conn, "echo", json!({"message": "hi"}));
        let out = bounded(drive(&mut conn.transport, 1000, 64, TIMEOUT, |id| {
            op.request(id)
        }))
        .await;
        assert_all_ok(&out.counters, 1000);
        let inversions = out.paired_order.windows(2).filter(|w| w[0] > w[1]).count();
        assert!(inversions > 10, "answers came out of order: {inversions}");
        conn.transport.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_truncated_sse_are_parse_errors_and_missing() {
    let _share = machine::loading();
    for args in [
        &["--fault", "garbage=10"][..],
        &["--answer", "sse", "--fault", "truncate=10"][..],
        &["--fault", "truncate=10"][..],
    ] {
        let server = serve(args);
        let mut conn = connect_http(&server.url, opts(ProtocolChoice::Auto)).await;
        let op = call(&conn, "echo", json!({"message": "hi"}));
        let out = bounded(drive(&mut conn.transport, 200, 8, TIMEOUT, |id| {
            op.request(id)
        }))
        .await;
        let c = &out.counters;
        assert_identity(c);
        assert!((18..=21).contains(&c.parse_errors), "{args:?} {c:?}");
        assert_eq!(c.missing, c.parse_errors, "{args:?} {c:?}");
        assert_eq!(c.ok + c.missing, 200, "{args:?} {c:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoiled_answers_are_each_counted_once() {
    let _share = machine::loading();
    let server = serve(&[
        "--fault",
        "duplicate=7,null-id=11,unknown-id=13,both=17,bad-version=19",
    ]);
    let mut conn = connect_http(&server.url, opts(ProtocolChoice::Auto)).await;
    let op = call(&conn, "echo", json!({"message": "hi"}));
    let out = bounded(drive(&mut conn.transport, 500, 16, TIMEOUT, |id| {
        op.request(id)
    }))
    .await;
    let c = &out.counters;
    assert_identity(c);
    assert_eq!(c.requests, 500);
    for (name, n) in [
        ("duplicate_id", c.duplicate_id),
        ("null_id", c.null_id),
        ("unknown_id", c.unknown_id),
        ("both_result_error", c.both_result_error),
        ("invalid_jsonrpc", c.invalid_jsonrpc),
    ] {
        assert!(n >= 10, "{name}: {c:?}");
    }
    // A null-id or unknown-id answer leaves its request unanswered when the body ends.
    assert_eq!(c.missing, c.null_id + c.unknown_id, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_child_ends_its_requests_as_missing() {
    let _share = machine::loading();
    let cmd = serve_cmd(&["--stdio", "--service-ms", "fixed:20"]);
    let connector = Connector::new(
        Endpoint::stdio(&line(&cmd)).unwrap(),
        opts(ProtocolChoice::Auto),
    )
    .unwrap();
    let mut conn = connector.connect().await.unwrap();
    let AnyTransport::Stdio(s) = &conn.transport else {
        panic!("stdio")
    };
    let pid = s.child_id().unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
    });
    let op = call(&conn, "echo", json!({"message": "hi"}));
    let out = bounded(drive(&mut conn.transport, 100_000, 16, TIMEOUT, |id| {
        op.request(id)
    }))
    .await;
    assert!(killer.join().unwrap().success());
    let c = &out.counters;
    assert!(out.down, "the transport reports the child's end");
    assert_identity(c);
    assert!(c.ok >= 16, "{c:?}");
    assert!((1..=16).contains(&c.missing), "{c:?}");
    assert!(c.requests < 100_000, "sending stopped: {c:?}");
    // Sending after the end fails at once, as transport errors.
    let out = bounded(drive(&mut conn.transport, 5, 5, TIMEOUT, |id| {
        op.request(id)
    }))
    .await;
    assert_eq!(out.counters.transport_errors, 5);
    conn.transport.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_answer_pairs_within_the_bound_and_is_dropped_beyond_it() {
    let _share = machine::loading();
    let server = serve(&["--answer", "sse"]);
    let ten_mb = json!({"bytes": 10_000_000});
    let mut conn = connect_http(&server.url, opts(ProtocolChoice::Auto)).await;
    let op = call(&conn, "payload", ten_mb.clone());
    // Three 10 MB answers at once take a debug build seconds of CPU each; on a busy machine
    // well past TIMEOUT. What is tested is that they pair, not how fast.
    let out = bounded(drive(
        &mut conn.transport,
        3,
        3,
        Duration::from_secs(150),
        |id| op.request(id),
    ))
    .await;
    assert_all_ok(&out.counters, 3);

    let small = ConnectOptions {
        max_message_bytes: 1 << 20,
        ..opts(ProtocolChoice::Auto)
    };
    for server_args in [&["--answer", "sse"][..], &[][..]] {
        let server = serve(server_args);
        let mut conn = connect_http(&server.url, small.clone()).await;
        let op = call(&conn, "payload", ten_mb.clone());
        let out = bounded(drive(&mut conn.transport, 3, 3, TIMEOUT, |id| {
            op.request(id)
        }))
        .await;
        let c = &out.counters;
        assert_identity(c);
        assert_eq!(
            (c.parse_errors, c.missing, c.ok),
            (3, 3, 0),
            "{server_args:?} {c:?}"
        );
    }

    let cmd = serve_cmd(&["--stdio"]);
    let connector = Connector::new(Endpoint::stdio(&line(&cmd)).unwrap(), small).unwrap();
    let mut conn = connector.connect().await.unwrap();
    let op = call(&conn, "payload", ten_mb);
    // No exchange ends on stdio: the request that lost its answer times out.
    let out = bounded(drive(
        &mut conn.transport,
        1,
        1,
        Duration::from_secs(6),
        |id| op.request(id),
    ))
    .await;
    let c = &out.counters;
    assert_identity(c);
    assert_eq!((c.parse_errors, c.timeouts), (1, 1), "{c:?}");
    // The transport is still in step with the child's lines.
    let op = call(&conn, "echo", json!({"message": "after"}));
    let out = bounded(drive(&mut conn.transport, 10, 10, TIMEOUT, |id| {
        op.request(id)
    }))
    .await;
    assert_all_ok(&out.counters, 10);
    conn.transport.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_http_429_and_503_with_retry_after() {
    for (reject, retry) in [("429", "3"), ("503", "7")] {
        let server = serve(&[
            "--capacity",
            "1",
            "--queue",
            "0",
            "--service-ms",
            "fixed:30",
            "--reject",
            reject,
            "--retry-after",
            retry,
        ]);
        let mut conn = connect_http(&server.url, opts(ProtocolChoice::Auto)).await;
        let op = call(&conn, "echo", json!({"message": "hi"}));
        let out = bounded(drive(&mut conn.transport, 100, 8, TIMEOUT, |id| {
            op.request(id)
        }))
        .await;
        let c = &out.counters;
        assert_identity(c);
        let refused = if reject == "429" {
            c.http_429
        } else {
            c.http_503
        };
        assert!(refused >= 10, "{c:?}");
        assert_eq!(c.ok + refused, 100, "{c:?}");
        assert_eq!(c.retry_after_max_s, retry.parse::<u64>().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_and_tls_failures_are_transport_errors() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = serve(&[]);
    let plain_port = server
        .url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap();
    for url in [
        format!("http://127.0.0.1:{closed}/mcp"),
        format!("https://127.0.0.1:{plain_port}/mcp"),
    ] {
        let connector =
            Connector::new(Endpoint::http(&url, vec![]), ConnectOptions::default()).unwrap();
        let err = connector.connect().await.unwrap_err();
        assert!(
            matches!(err, mcpload::client::McpError::Transport(_)),
            "{url}: {err}"
        );
        let mut t = connector.raw_transport().unwrap();
        let op =
            mcpload::client::Operation::new(Revision::V2026_07_28, "tools/list", None).unwrap();
        let out = bounded(drive(&mut t, 5, 5, TIMEOUT, |id| op.request(id))).await;
        assert_identity(&out.counters);
        assert_eq!(out.counters.transport_errors, 5, "{url}");
    }
}

#[test]
fn secrets_in_headers_come_from_the_environment_and_stay_out_of_errors() {
    // SAFETY-free: the variable is unique to this test; nothing else reads it.
    let missing = Connector::new(
        Endpoint::http(
            "http://127.0.0.1:9/mcp",
            vec![(
                "Authorization".into(),
                "Bearer ${MCPLOAD_TEST_NEVER_SET_TOKEN}".into(),
            )],
        ),
        ConnectOptions::default(),
    )
    .unwrap_err();
    assert!(missing.to_string().contains("MCPLOAD_TEST_NEVER_SET_TOKEN"));
    let bad = Connector::new(
        Endpoint::http(
            "http://127.0.0.1:9/mcp",
            vec![("X-Key".into(), "s3cret\u{1}value".into())],
        ),
        ConnectOptions::default(),
    )
    .unwrap_err();
    assert!(!bad.to_string().contains("s3cret"), "{bad}");
    let ok = Connector::new(
        Endpoint::http(
            "http://127.0.0.1:9/mcp",
            vec![("X-Key".into(), "s3cret".into())],
        ),
        ConnectOptions::default(),
    )
    .unwrap();
    assert!(
        !format!("{ok:?}").contains("s3cret"),
        "debug output hides header values"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_slow_to_start_still_ends_on_2026_07_28() {
    // The child sleeps past the 5 s discover wait before it reads stdin: discover goes
    // unanswered in time, initialize is sent, and the late discover answer decides.
    let serve = serve_cmd(&["--stdio", "--era", "modern"]).join(" ");
    let mut stdio = StdioOptions::from_command_line("sh -c").unwrap();
    stdio.args.push(format!("sleep 6; exec {serve}"));
    let connector = Connector::new(Endpoint::Stdio(stdio), opts(ProtocolChoice::Auto)).unwrap();
    let mut conn = tokio::time::timeout(Duration::from_secs(40), connector.connect())
        .await
        .expect("connect is bounded")
        .unwrap();
    assert_eq!(conn.server.revision, Revision::V2026_07_28);
    assert!(
        conn.server.detection.contains("answered late"),
        "{}",
        conn.server.detection
    );
    let op = call(&conn, "echo", json!({"message": "hi"}));
    let out = bounded(drive(&mut conn.transport, 20, 4, TIMEOUT, |id| {
        op.request(id)
    }))
    .await;
    assert_all_ok(&out.counters, 20);
    conn.transport.close().await;
}
