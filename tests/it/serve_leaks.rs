//! The misbehaviour knobs of the built-in target (`--leak-bytes-per-call`, `--leak-fd-every`,
//! `--drift-ms-per-minute`) and its `sessions_held` gauge, checked from outside the real
//! `mcpload serve` child: its RSS and descriptors read from `/proc/<pid>`, its added delay
//! timed by the client (lower bounds only), its sessions against those the client opened.

use crate::support::http_client::*;
use crate::support::servers::{Server, rss_bytes, serve, target_stats};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Calls of `echo` made for the memory checks: 400 × 64 KiB = 25 MiB, far above what the
/// allocator and the runtime move on their own.
const CALLS: u64 = 400;
const LEAK_BYTES: u64 = 64 << 10;

/// The descriptors of process `pid` that are not sockets (the client's connections come
/// and go; what the target leaks is a file).
fn file_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| !target.to_string_lossy().starts_with("socket:"))
        .count()
}

/// One call of `echo` (2026-07-28, no session) on `conn`, answered with a result.
async fn echo_call(conn: &mut Conn, id: u64) {
    let answer = tool_call(conn, id, "echo", json!({"message": "leak"})).await;
    assert!(answer.get("result").is_some(), "{answer:?}");
}

/// `n` calls of `echo`, one by one on `conn`.
async fn echo_calls(conn: &mut Conn, n: u64) {
    for id in 1..=n {
        echo_call(conn, id).await;
    }
}

/// How much the RSS of `server` grows over [`CALLS`] calls, after a warm-up that lets the
/// runtime and the allocator settle, and its `/stats` after.
async fn rss_growth(server: &Server) -> (u64, Value) {
    let mut conn = Conn::open(server.addr()).await;
    echo_calls(&mut conn, 50).await;
    let before = rss_bytes(server.pid());
    echo_calls(&mut conn, CALLS).await;
    let after = rss_bytes(server.pid());
    (after.saturating_sub(before), conn.stats().await)
}

#[tokio::test]
async fn leaked_bytes_grow_the_resident_set_by_their_size() {
    let truth = CALLS * LEAK_BYTES;
    let leaky = serve(&["--leak-bytes-per-call", &LEAK_BYTES.to_string()]);
    let (growth, stats) = rss_growth(&leaky).await;
    // The leak itself adds exactly its pages; the ±20% (5 MiB) is for the rest of the
    // process, whose allocator takes memory 2 MiB at a time (a huge page or two at most).
    let (low, high) = (truth * 8 / 10, truth * 12 / 10);
    assert!(
        (low..=high).contains(&growth),
        "RSS grew {growth} bytes over {CALLS} calls, the leak is {truth}"
    );
    assert_eq!(stats["leaked_bytes"], (CALLS + 50) * LEAK_BYTES);
    assert_eq!(stats["leaked_fds"], 0);

    let plain = serve(&[]);
    let (growth, stats) = rss_growth(&plain).await;
    assert!(
        growth < truth / 5,
        "without the knob RSS grew {growth} bytes over {CALLS} calls"
    );
    assert_eq!(stats["leaked_bytes"], 0);
}

#[tokio::test]
async fn every_tenth_call_keeps_a_descriptor_open() {
    let server = serve(&["--leak-fd-every", "10"]);
    let mut conn = Conn::open(server.addr()).await;
    // Five calls first (no descriptor yet): whatever the first calls open lazily is open
    // before the count starts.
    echo_calls(&mut conn, 5).await;
    let before = file_fds(server.pid());
    echo_calls(&mut conn, 100).await;
    let after = file_fds(server.pid());
    // 105 calls: floor(105 / 10) = 10 descriptors, none after the first five.
    assert_eq!(after - before, 10, "{before} -> {after}");
    assert_eq!(conn.stats().await["leaked_fds"], 10);
    drop(conn);
    assert_eq!(target_stats(&server.url)["leaked_fds"], 10);
}

#[tokio::test]
async fn drift_lengthens_service_over_http_by_the_time_elapsed() {
    // 60,000 ms a minute: one more millisecond of service per millisecond since the start.
    let server = serve(&["--drift-ms-per-minute", "60000"]);
    // The target started before it printed its URL, so the drift of a request sent `t`
    // after this instant is at least `t`. A busy machine only makes the calls later and
    // slower: every bound below is a lower one.
    let listening = Instant::now();
    let mut conn = Conn::open(server.addr()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in 1..=2 {
        let sent_after = listening.elapsed();
        let sent = Instant::now();
        echo_call(&mut conn, id).await;
        let took = sent.elapsed();
        // The second call is sent after the first one's wait, so it waits at least 600 ms.
        assert!(
            took >= sent_after,
            "call {id} sent {sent_after:?} after the start took {took:?}"
        );
    }
}

#[tokio::test]
async fn drift_lengthens_service_over_stdio_too() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
        .args(["serve", "--stdio", "--drift-ms-per-minute", "60000"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = async |line: Value| {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("an answer within the deadline")
            .unwrap()
            .expect("a line");
        serde_json::from_str::<Value>(&answer).unwrap()
    };
    let init = exchange(initialize_request(json!(0), "2025-11-25")).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    // The target started before it answered `initialize`: a lower bound on its age from now.
    let answered = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent_after = answered.elapsed();
    let sent = Instant::now();
    let echo = exchange(echo(1)).await;
    let took = sent.elapsed();
    assert_eq!(echo["id"], 1);
    assert!(echo.get("result").is_some(), "{echo}");
    assert!(
        took >= sent_after,
        "sent {sent_after:?} after the start, took {took:?}"
    );
    drop(stdin);
    let status = tokio::time::timeout(DEADLINE, child.wait()).await;
    assert!(status.expect("exits when stdin ends").unwrap().success());
}

/// Opens `opened` legacy sessions round the connections `conns` and ends `deleted` of them
/// with `DELETE`: `sessions_held` must be the difference, on one server and on a fleet.
#[tokio::test]
async fn sessions_held_is_opened_less_closed() {
    const VERSION: &str = "2025-11-25";
    for args in [&[][..], &["--replicas", "2"][..]] {
        let server = serve(args);
        // Two connections: with two replicas (round-robin per connection), one each.
        let mut conns = [
            Conn::open(server.addr()).await,
            Conn::open(server.addr()).await,
        ];
        let mut sessions = Vec::new();
        for i in 0..5 {
            let conn = &mut conns[i % 2];
            sessions.push((
                i % 2,
                initialize(conn, VERSION).await.expect("a session id"),
            ));
        }
        for (conn, id) in &sessions[..2] {
            let headers = legacy_headers(VERSION, Some(id));
            let reply = conns[*conn]
                .send("DELETE", "/mcp", &headers, Vec::new())
                .await;
            assert_eq!(reply.status, 200, "{args:?}");
        }
        let stats = conns[0].stats().await;
        assert_eq!(stats["sessions_opened"], 5, "{args:?}");
        assert_eq!(stats["sessions_closed"], 2, "{args:?}");
        assert_eq!(stats["sessions_held"], 3, "{args:?}: {stats}");
    }
}
