//! Each fault knob of the built-in target, over real sockets (JSON bodies, SSE streams,
//! batches) and a real stdio child: N requests in, the faults counted by an independent
//! client written here, and both compared with the target's /stats exactly.

use crate::support::http_client::*;
use crate::support::scratch::scratch;
use mcpload::server::{AnswerMode, BatchPolicy, ServeConfig, start_http};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Fault names in the documented precedence order, with their /stats keys.
const KINDS: [(&str, &str); 8] = [
    ("drop", "drop"),
    ("null-id", "null_id"),
    ("unknown-id", "unknown_id"),
    ("duplicate", "duplicate"),
    ("both", "both"),
    ("bad-version", "bad_version"),
    ("garbage", "garbage"),
    ("truncate", "truncate"),
];

/// Which fault request `seq` gets: the first kind (in precedence order) whose period
/// divides it.
fn fault_of(periods: &BTreeMap<&str, u64>, seq: u64) -> Option<&'static str> {
    KINDS
        .iter()
        .find(|(cli, _)| periods.get(cli).is_some_and(|p| seq.is_multiple_of(*p)))
        .map(|(_, key)| *key)
}

fn expected_faults(spec: &str, n: u64) -> BTreeMap<&'static str, u64> {
    let periods: BTreeMap<&str, u64> = spec
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    let mut out: BTreeMap<&str, u64> = KINDS.iter().map(|(_, k)| (*k, 0)).collect();
    for seq in 1..=n {
        if let Some(k) = fault_of(&periods, seq) {
            *out.get_mut(k).unwrap() += 1;
        }
    }
    out
}

fn stats_faults(stats: &Value) -> BTreeMap<&'static str, u64> {
    KINDS
        .iter()
        .map(|(_, k)| (*k, stats["faults"][k].as_u64().unwrap()))
        .collect()
}

/// What docs/metrics.md says a client counts when `faulted` of `total` plain echo answers got
/// fault `key` (one request per exchange).
fn expected_tally(key: &str, total: u64, faulted: u64, sse: bool) -> Tally {
    // Legacy runs (JSON) also count the ok answer to `initialize`.
    let mut t = Tally {
        ok: total - faulted + u64::from(!sse),
        ..Tally::default()
    };
    match key {
        "drop" => t.missing = faulted,
        "null_id" => (t.null_id, t.missing) = (faulted, faulted),
        "unknown_id" => (t.unknown_id, t.missing) = (faulted, faulted),
        "duplicate" => (t.ok, t.duplicate_id) = (total + u64::from(!sse), faulted),
        "both" => t.both_result_error = faulted,
        "bad_version" => t.invalid_jsonrpc = faulted,
        "garbage" => (t.parse_errors, t.missing) = (faulted, faulted),
        // A cut body, or an SSE stream that ends inside an event: unreadable bytes.
        "truncate" => (t.parse_errors, t.missing) = (faulted, faulted),
        other => panic!("{other}"),
    }
    t
}

/// Sends `n` echo calls one by one over one connection (legacy era with JSON answers,
/// 2026-07-28 with SSE answers) and counts every reply.
async fn drive(cfg: ServeConfig, n: u64) -> (Tally, Value) {
    let sse = cfg.answer == AnswerMode::Sse;
    let target = start_http(cfg).await.unwrap();
    let mut conn = Conn::open(target.addr()).await;
    let mut tally = Tally::default();
    let session = if sse {
        None
    } else {
        // `initialize` is never faulted; its answer (checked by the helper) is one ok.
        tally.ok += 1;
        initialize(&mut conn, "2025-11-25").await
    };
    for i in 1..=n {
        let reply = if sse {
            let (headers, body) = modern(
                json!(i),
                "tools/call",
                json!({"name": "echo", "arguments": {"message": format!("m{i}")}}),
            );
            conn.post(&headers, &body).await
        } else {
            conn.post(&legacy_headers("2025-11-25", session.as_deref()), &echo(i))
                .await
        };
        if sse && reply.status == 200 && !reply.body.is_empty() {
            assert!(reply.is_sse(), "answer {i} should be an SSE stream");
        }
        tally.exchange(&[json!(i)], &reply, false);
    }
    let stats = conn.stats().await;
    (tally, stats)
}

#[tokio::test]
async fn every_fault_kind_json_and_sse() {
    const N: u64 = 30;
    for answer in [AnswerMode::Json, AnswerMode::Sse] {
        for (cli, key) in KINDS {
            let spec = format!("{cli}=3");
            let cfg = ServeConfig {
                answer,
                fault: spec.parse().unwrap(),
                ..ServeConfig::default()
            };
            let (tally, stats) = drive(cfg, N).await;
            let want = expected_faults(&spec, N);
            assert_eq!(want[key], 10);
            assert_eq!(stats_faults(&stats), want, "{spec} {answer:?}: {stats}");
            let sse = answer == AnswerMode::Sse;
            assert_eq!(tally, expected_tally(key, N, 10, sse), "{spec} {answer:?}");
            assert_eq!(
                tally,
                Tally::from_stats(&stats),
                "{spec} {answer:?}: {stats}"
            );
            assert_identity(&stats);
        }
    }
}

#[tokio::test]
async fn coinciding_periods_follow_the_documented_order() {
    let spec = "garbage=3,drop=2,both=5";
    let cfg = ServeConfig {
        fault: spec.parse().unwrap(),
        ..ServeConfig::default()
    };
    let (tally, stats) = drive(cfg, 30).await;
    let want = expected_faults(spec, 30);
    // Even numbers: drop (it beats garbage at 6, 12, … and both at 10, 20, 30); 15 matches
    // garbage and both: both comes first. Garbage keeps 3, 9, 21, 27; both 5, 15, 25.
    assert_eq!((want["drop"], want["garbage"], want["both"]), (15, 4, 3));
    assert_eq!(stats_faults(&stats), want);
    assert_eq!(tally, Tally::from_stats(&stats));
    assert_eq!(tally.missing, 15 + 4);
    assert_eq!(tally.parse_errors, 4);
    assert_eq!(tally.both_result_error, 3);
    assert_eq!(tally.ok, 1 + 8);
    assert_identity(&stats);
}

#[tokio::test]
async fn random_faults_are_seeded() {
    let run = |seed| {
        let cfg = ServeConfig {
            fault_random: "drop=0.1,duplicate=0.1,garbage=0.1".parse().unwrap(),
            seed,
            ..ServeConfig::default()
        };
        drive(cfg, 200)
    };
    let (t1, s1) = run(42).await;
    let (t2, s2) = run(42).await;
    let (_, s3) = run(43).await;
    assert_eq!(stats_faults(&s1), stats_faults(&s2));
    assert_eq!(t1, t2);
    assert_ne!(stats_faults(&s1), stats_faults(&s3));
    assert_eq!(t1, Tally::from_stats(&s1));
    let f = stats_faults(&s1);
    assert!(
        f["drop"] > 0 && f["duplicate"] > 0 && f["garbage"] > 0,
        "{s1}"
    );
    assert_eq!(
        f["drop"] + f["duplicate"] + f["garbage"],
        f.values().sum::<u64>()
    );
    assert_identity(&s1);
}

#[tokio::test]
async fn faults_in_batches_json_and_sse() {
    let spec = "null-id=4,duplicate=7,garbage=5,drop=9,truncate=6";
    for answer in [AnswerMode::Json, AnswerMode::Sse] {
        let cfg = ServeConfig {
            answer,
            fault: spec.parse().unwrap(),
            ..ServeConfig::default()
        };
        let target = start_http(cfg).await.unwrap();
        let mut conn = Conn::open(target.addr()).await;
        let session = initialize(&mut conn, "2025-03-26").await;
        let mut tally = Tally {
            ok: 1, // the answer to initialize
            ..Tally::default()
        };
        let mut next = 1;
        for _ in 0..8 {
            let ids: Vec<Value> = (next..next + 5).map(|i| json!(i)).collect();
            let batch: Vec<Value> = (next..next + 5).map(echo).collect();
            next += 5;
            let reply = conn
                .post(
                    &legacy_headers("2025-03-26", session.as_deref()),
                    &json!(batch),
                )
                .await;
            assert_eq!(reply.status, 200);
            tally.exchange(&ids, &reply, true);
        }
        let stats = conn.stats().await;
        assert_eq!(
            stats_faults(&stats),
            expected_faults(spec, 40),
            "{answer:?}"
        );
        assert_eq!(tally, Tally::from_stats(&stats), "{answer:?}: {stats}");
        assert!(tally.response_count_mismatch > 0);
        assert_eq!(stats["batches"], 8);
        assert_identity(&stats);
    }
}

#[tokio::test]
async fn faults_over_stdio_match_the_stats_file() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let spec = "drop=4,truncate=5,both=6,unknown-id=11";
    let dir = scratch("serve-faults-stdio");
    let stats_file = dir.join("stats.json");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
        .args(["serve", "--stdio", "--fault", spec, "--stats"])
        .arg(&stats_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = request(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let mut input = format!("{init}\n");
    input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    for i in 1..=30 {
        input.push_str(&format!("{}\n", echo(i)));
    }
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin); // end of input: the target answers what is left, writes its stats, exits
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = Vec::new();
    let read_all = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push(line);
        }
    };
    tokio::time::timeout(DEADLINE, read_all)
        .await
        .expect("stdout ends");
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    // The client's count: every line is one payload; the ids sent are 0 ..= 30.
    let ids: Vec<Value> = (0..=30).map(|i| json!(i)).collect();
    let mut tally = Tally::default();
    tally.payloads(
        &ids,
        out.iter().map(|l| l.clone().into_bytes()).collect(),
        false,
        false,
    );
    let stats: Value = serde_json::from_slice(&std::fs::read(&stats_file).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(stats_faults(&stats), expected_faults(spec, 30), "{stats}");
    assert_eq!(tally, Tally::from_stats(&stats), "{stats}");
    assert_eq!(tally.parse_errors, expected_faults(spec, 30)["truncate"]);
    assert_eq!(
        tally.ok,
        1 + 30 - expected_faults(spec, 30).values().sum::<u64>()
    );
    assert_identity(&stats);
}

#[tokio::test]
async fn batch_policy_accept_and_reject_override_the_revision() {
    for (policy, version, accepted) in [
        (BatchPolicy::Accept, "2025-11-25", true),
        (BatchPolicy::Reject, "2025-03-26", false),
    ] {
        let cfg = ServeConfig {
            batches: policy,
            ..ServeConfig::default()
        };
        let target = start_http(cfg).await.unwrap();
        let mut conn = Conn::open(target.addr()).await;
        let session = initialize(&mut conn, version).await;
        let reply = conn
            .post(
                &legacy_headers(version, session.as_deref()),
                &json!([echo(1), echo(2)]),
            )
            .await;
        assert_eq!(reply.status == 200, accepted, "{policy:?}");
        let stats = conn.stats().await;
        assert_eq!(stats["batches"], u64::from(accepted));
        assert_eq!(stats["batch_rejected"], u64::from(!accepted));
    }
}
