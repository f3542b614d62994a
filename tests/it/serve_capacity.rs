//! The capacity model of the built-in target over real sockets: admission of `capacity +
//! queue` POSTs and refusal (429 / 503 with Retry-After) past that, service slots and
//! service time (the C/S ceiling), and stall windows. Time is only ever a lower bound here.

use crate::support::http_client::*;
use mcpload::server::{RejectStatus, ServeConfig, start_http};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn call(id: u64, tool: &str, args: Value) -> (Vec<(String, String)>, Value) {
    modern(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": args}),
    )
}

/// Sends one call on its own connection, in the background.
fn spawn_call(
    addr: SocketAddr,
    id: u64,
    tool: &'static str,
    args: Value,
) -> tokio::task::JoinHandle<Reply> {
    tokio::spawn(async move {
        let mut conn = Conn::open(addr).await;
        let (headers, body) = call(id, tool, args);
        conn.post(&headers, &body).await
    })
}

/// Polls /stats until `key` reaches `want` (bounded by the test deadline).
async fn wait_for(conn: &mut Conn, key: &str, want: u64) -> Value {
    let start = Instant::now();
    loop {
        let stats = conn.stats().await;
        if stats[key].as_u64() == Some(want) {
            return stats;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{key} never reached {want}: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_4_queue_4_serves_8_and_refuses_the_ninth() {
    let cfg = ServeConfig {
        capacity: 4,
        queue: 4,
        ..ServeConfig::default()
    };
    let target = start_http(cfg).await.unwrap();
    let addr = target.addr();
    let slow: Vec<_> = (1..=8)
        .map(|i| spawn_call(addr, i, "sleep", json!({"ms": 1000})))
        .collect();
    let mut probe = Conn::open(addr).await;
    wait_for(&mut probe, "in_flight", 8).await;
    let (headers, body) = call(9, "echo", json!({"message": "one too many"}));
    let ninth = probe.post(&headers, &body).await;
    assert_eq!(ninth.status, 429);
    assert_eq!(ninth.header("retry-after"), Some("1"));
    for (i, h) in slow.into_iter().enumerate() {
        let r = h.await.unwrap();
        assert_eq!(r.status, 200, "slow call {}", i + 1);
        let v = r.json();
        assert_eq!(v["id"], i as u64 + 1);
        assert_eq!(v["result"]["content"][0]["text"], "slept 1000 ms");
    }
    let stats = probe.stats().await;
    assert_eq!(stats["http_429"], 1);
    assert_eq!(stats["http_status"]["429"], 1);
    assert_eq!(stats["serving_max"], 4);
    assert_eq!(stats["in_flight_max"], 8);
    assert_eq!(stats["requests_seen"], 8);
    assert_identity(&stats);
    // Room again once they are done.
    let again = probe.post(&headers, &body).await;
    assert_eq!(again.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_can_be_503_with_its_own_retry_after() {
    let cfg = ServeConfig {
        capacity: 1,
        reject: RejectStatus::ServiceUnavailable,
        retry_after_s: 7,
        ..ServeConfig::default()
    };
    let target = start_http(cfg).await.unwrap();
    let slow = spawn_call(target.addr(), 1, "sleep", json!({"ms": 600}));
    let mut probe = Conn::open(target.addr()).await;
    wait_for(&mut probe, "in_flight", 1).await;
    let (headers, body) = call(2, "echo", json!({"message": "x"}));
    let refused = probe.post(&headers, &body).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("7"));
    assert_eq!(slow.await.unwrap().status, 200);
    let stats = probe.stats().await;
    assert_eq!(
        (stats["http_503"].as_u64(), stats["http_429"].as_u64()),
        (Some(1), Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_time_through_slots_sets_the_ceiling() {
    // Capacity 2, 100 ms each: 10 requests need at least 5 rounds, 500 ms.
    let cfg = ServeConfig {
        capacity: 2,
        queue: 100,
        service_ms: "fixed:100".parse().unwrap(),
        ..ServeConfig::default()
    };
    let target = start_http(cfg).await.unwrap();
    let start = Instant::now();
    let calls: Vec<_> = (1..=10)
        .map(|i| spawn_call(target.addr(), i, "echo", json!({"message": "hi"})))
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap().status, 200);
    }
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    let stats = target.stats();
    assert_eq!(stats.serving_max, 2);
    assert_eq!(stats.client_view.ok, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_holds_every_answer_until_it_ends() {
    let before = Instant::now();
    let cfg = ServeConfig {
        stall: vec!["200ms:1500ms".parse().unwrap()],
        ..ServeConfig::default()
    };
    let target = start_http(cfg).await.unwrap();
    let mut conn = Conn::open(target.addr()).await;
    tokio::time::sleep_until((before + Duration::from_millis(600)).into()).await;
    let (headers, body) = call(1, "echo", json!({"message": "frozen"}));
    let reply = conn.post(&headers, &body).await;
    assert_eq!(reply.status, 200);
    // The target started after `before`, so its stall ended at least 1.7 s after it.
    assert!(
        before.elapsed() >= Duration::from_millis(1700),
        "{:?}",
        before.elapsed()
    );
}
