//! The built-in target as a fleet (`--replicas N --balance …`) over real sockets: each new
//! connection assigned to a replica in turn (round-robin) or by a seeded draw (random); a
//! session known to the replica that handed it out alone, answered 404 elsewhere as the spec
//! says, unless sessions are shared; sticky routing on `Mcp-Session-Id`; a capacity model
//! per replica; `/stats` per replica and in total.

use crate::support::http_client::*;
use crate::support::mcpload;
use mcpload::server::{Balance, RejectStatus, ServeConfig, Stall, start_http};
use serde_json::json;
use std::time::{Duration, Instant};

const V: &str = "2025-06-18";

fn fleet(balance: Balance, shared_sessions: bool) -> ServeConfig {
    ServeConfig {
        replicas: 2,
        balance,
        shared_sessions,
        ..ServeConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_a_session_is_unknown_to_the_other_replica() {
    let target = start_http(fleet(Balance::RoundRobin, false)).await.unwrap();
    // Connections go to replica 0, 1, 0, … in the order they are accepted.
    let mut a = Conn::open(target.addr()).await;
    let mut b = Conn::open(target.addr()).await;
    let session = initialize(&mut a, V).await.expect("a session");
    let headers = legacy_headers(V, Some(&session));
    assert_eq!(a.post(&headers, &echo(1)).await.status, 200);
    let refused = b.post(&headers, &echo(2)).await;
    assert_eq!(refused.status, 404);
    let e = refused.json();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(null), json!(-32001))
    );
    assert_eq!(
        b.send("DELETE", "/mcp", &headers, Vec::new()).await.status,
        404
    );
    assert_eq!(
        a.send("DELETE", "/mcp", &headers, Vec::new()).await.status,
        200
    );
    let s = target.stats();
    assert_eq!(s.unknown_session, 2);
    assert_eq!(s.http_status.get(&404), Some(&2));
    assert_eq!((s.sessions_opened, s.sessions_closed), (1, 1));
    let per: Vec<_> = s
        .replicas
        .iter()
        .map(|r| {
            (
                r.replica,
                r.connections,
                r.requests,
                r.unknown_session,
                r.sessions_opened,
            )
        })
        .collect();
    // Replica 0: initialize, initialized, the call, the DELETE; replica 1: two refusals.
    assert_eq!(per, [(0, 1, 4, 0, 1), (1, 1, 2, 2, 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_routes_a_session_to_the_replica_that_handed_it_out() {
    let target = start_http(fleet(Balance::Sticky, false)).await.unwrap();
    let mut a = Conn::open(target.addr()).await;
    let mut b = Conn::open(target.addr()).await;
    // A request without a session goes where its connection goes: one session per replica.
    let on_0 = initialize(&mut a, V).await.expect("a session");
    let on_1 = initialize(&mut b, V).await.expect("a session");
    for (on_a, session) in [(true, &on_1), (false, &on_0), (true, &on_0)] {
        let conn = if on_a { &mut a } else { &mut b };
        let r = conn.post(&legacy_headers(V, Some(session)), &echo(1)).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    // An id no replica handed out is still unknown.
    let forged = legacy_headers(V, Some("00000000-0000000000000001"));
    assert_eq!(a.post(&forged, &echo(2)).await.status, 404);
    let s = target.stats();
    assert_eq!(s.unknown_session, 1);
    let per: Vec<_> = s
        .replicas
        .iter()
        .map(|r| (r.requests, r.sessions_opened))
        .collect();
    // Each: its initialize and initialized, and the calls in its session (two on replica
    // 0); the forged id went where its connection goes, replica 0.
    assert_eq!(per, [(5, 1), (3, 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_shared_sessions_every_replica_knows_every_session() {
    let target = start_http(fleet(Balance::RoundRobin, true)).await.unwrap();
    let mut a = Conn::open(target.addr()).await;
    let mut b = Conn::open(target.addr()).await;
    let session = initialize(&mut a, V).await.expect("a session");
    let headers = legacy_headers(V, Some(&session));
    assert_eq!(b.post(&headers, &echo(1)).await.status, 200);
    assert_eq!(
        b.send("DELETE", "/mcp", &headers, Vec::new()).await.status,
        200
    );
    assert_eq!(
        a.post(&headers, &echo(2)).await.status,
        404,
        "ended everywhere"
    );
    let s = target.stats();
    assert_eq!(s.unknown_session, 1);
    let unknown: Vec<u64> = s.replicas.iter().map(|r| r.unknown_session).collect();
    assert_eq!(unknown, [1, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_assignment_is_the_seeds() {
    let mut seen = Vec::new();
    for _ in 0..2 {
        let cfg = ServeConfig {
            seed: 7,
            ..fleet(Balance::Random, false)
        };
        let target = start_http(cfg).await.unwrap();
        for _ in 0..16 {
            let mut c = Conn::open(target.addr()).await;
            assert_eq!(c.post(&base_headers(), &echo(1)).await.status, 200);
        }
        let per: Vec<u64> = target
            .stats()
            .replicas
            .iter()
            .map(|r| r.connections)
            .collect();
        assert_eq!(per.iter().sum::<u64>(), 16);
        assert!(per.iter().all(|n| *n > 0), "{per:?}");
        seen.push(per);
    }
    assert_eq!(seen[0], seen[1], "the same seed, the same draws");
}

/// Capacity 1 and no queue per replica, and every request frozen by a stall: of two calls
/// on each replica one is admitted and one refused, where one model for all would admit
/// one call in four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_replica_has_its_own_capacity_model() {
    let cfg = ServeConfig {
        capacity: 1,
        reject: RejectStatus::TooManyRequests,
        stall: vec![Stall {
            at: Duration::ZERO,
            duration: Duration::from_secs(60),
        }],
        ..fleet(Balance::RoundRobin, false)
    };
    let target = start_http(cfg).await.unwrap();
    let mut calls = Vec::new();
    for i in 0..4 {
        // Opened in turn: replicas 0, 1, 0, 1.
        let mut c = Conn::open(target.addr()).await;
        calls.push(tokio::spawn(async move {
            let (headers, body) = (base_headers(), echo(i));
            c.send("POST", "/mcp", &headers, serde_json::to_vec(&body).unwrap())
                .await
                .status
        }));
    }
    // Every call is decided once two are running and the rest refused.
    let start = Instant::now();
    let s = loop {
        let s = target.stats();
        if s.in_flight + s.http_429 == 4 {
            break s;
        }
        assert!(start.elapsed() < DEADLINE, "never decided: {s:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let rejected: Vec<u64> = s.replicas.iter().map(|r| r.rejected).collect();
    assert_eq!((s.in_flight, s.http_429), (2, 2));
    assert_eq!(rejected, [1, 1]);
    for call in calls {
        call.abort();
    }
}

#[test]
fn replicas_are_checked_and_served_over_http_only() {
    for (args, says) in [
        (
            &["serve", "--replicas", "0"][..],
            "replicas must be from 1 to 64",
        ),
        (
            &["serve", "--stdio", "--replicas", "2"],
            "replicas are served over HTTP only",
        ),
    ] {
        let out = mcpload(args);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{out:?}"
        );
    }
    let out = mcpload(&["serve", "--balance", "least-loaded"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("round-robin"));
}
