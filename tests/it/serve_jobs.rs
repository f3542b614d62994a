//! The built-in target's job API (`job_start`, `job_status`, `job_report`) and its
//! per-operation ground truth, over real HTTP: a job's life to a terminal state, failures
//! and lost report items by period with exact `/stats` counts, idempotency keys, unknown
//! and expired ids, and the per-operation breakdown summing to the totals with faults on.
//! Nothing here depends on timing: the tests wait for states by polling, within a bound.

use crate::support::http_client::*;
use crate::support::servers::serve;
use mcpload::server::{ServeConfig, start_http};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The JSON-RPC error code of a `request_key` reused with another input (docs/target.md).
const KEY_CONFLICT: i64 = -32010;
/// The JSON-RPC error code of `job_report` before the job finished (docs/target.md).
const NOT_FINISHED: i64 = -32012;
const INVALID_PARAMS: i64 = -32602;
const TERMINAL: [&str; 3] = ["succeeded", "partial", "failed"];

/// One 2026-07-28 `tools/call` and its JSON-RPC answer.
async fn call(conn: &mut Conn, tool: &str, args: Value) -> Value {
    tool_call(conn, 1, tool, args).await
}

/// A tool's `structuredContent`, checked against the text it mirrors.
fn structured(answer: &Value) -> Value {
    let result = &answer["result"];
    assert!(result.get("structuredContent").is_some(), "{answer}");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {answer}"));
    assert_eq!(text, result["structuredContent"], "{answer}");
    result["structuredContent"].clone()
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {answer}"))
}

async fn start(conn: &mut Conn, args: Value) -> Value {
    structured(&call(conn, "job_start", args).await)
}

/// Polls `job_status` (at its `pollInterval`) until the job is terminal; returns every
/// status seen. Bounded: a job of these tests ends within a few seconds even on a busy
/// machine, 60 s is the limit.
async fn wait_terminal(conn: &mut Conn, job_id: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let status = structured(&call(conn, "job_status", json!({"job_id": job_id})).await);
        let state = status["state"].as_str().unwrap().to_owned();
        let interval = status["pollInterval"].as_u64().unwrap();
        seen.push(status);
        if TERMINAL.contains(&state.as_str()) {
            return seen;
        }
        assert!(Instant::now() < deadline, "{job_id} not finished: {seen:?}");
        tokio::time::sleep(Duration::from_millis(interval)).await;
    }
}

fn jobs(stats: &Value) -> BTreeMap<String, u64> {
    stats["jobs"]
        .as_object()
        .unwrap_or_else(|| panic!("no jobs in {stats}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// The job counters expected: every one zero but those given.
fn jobs_expected(set: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = [
        "created",
        "replays",
        "conflicts",
        "refused_full",
        "polls",
        "reports_read",
        "reports_unfinished",
        "reports_lossy",
        "items_lost",
        "unknown_job",
        "live",
        "double_effects",
        "accepted_conflicts",
        "lookups",
    ]
    .iter()
    .map(|k| (k.to_string(), 0))
    .collect();
    for (k, v) in set {
        *out.get_mut(*k).unwrap_or_else(|| panic!("{k}")) = *v;
    }
    out
}

#[tokio::test]
async fn a_job_goes_from_queued_through_running_to_succeeded() {
    let target = start_http(ServeConfig {
        job_item_ms: 20,
        job_queue_ms: 100,
        job_poll_interval_ms: 10,
        ..ServeConfig::default()
    })
    .await
    .unwrap();
    let mut conn = Conn::open(target.addr()).await;
    let started = start(&mut conn, json!({"items": 5})).await;
    // The state is taken when the job is created: still in its queue delay.
    assert_eq!(started["state"], "queued", "{started}");
    let id = started["job_id"].as_str().unwrap().to_owned();
    let seen = wait_terminal(&mut conn, &id).await;
    let order = ["queued", "running", "succeeded"];
    let mut at = 0;
    let mut processed = 0;
    for s in &seen {
        let rank = order.iter().position(|o| s["state"] == *o).unwrap();
        assert!(rank >= at, "states go forward only: {seen:?}");
        at = rank;
        let p = s["processed"].as_u64().unwrap();
        assert!(p >= processed && p <= 5, "{seen:?}");
        processed = p;
        assert_eq!((&s["job_id"], &s["total"]), (&json!(id), &json!(5)));
        assert_eq!(s["pollInterval"], 10);
        if s["state"] == "queued" {
            assert_eq!(p, 0);
        }
    }
    assert_eq!(processed, 5);
    let report = structured(&call(&mut conn, "job_report", json!({"job_id": id})).await);
    assert_eq!(report["state"], "succeeded");
    assert_eq!(
        (&report["succeeded"], &report["failed"]),
        (&json!(5), &json!(0))
    );
    let indexes: Vec<u64> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["outcome"], "succeeded");
            i["index"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4]);
    let stats = conn.stats().await;
    let polls = seen.len() as u64;
    assert_eq!(
        jobs(&stats),
        jobs_expected(&[
            ("created", 1),
            ("polls", polls),
            ("reports_read", 1),
            ("live", 1)
        ]),
        "{stats}"
    );
}

#[tokio::test]
async fn a_report_is_refused_until_the_job_is_finished() {
    // One item of a minute: the job is not finished while this test runs.
    let target = start_http(ServeConfig {
        job_item_ms: 60_000,
        ..ServeConfig::default()
    })
    .await
    .unwrap();
    let mut conn = Conn::open(target.addr()).await;
    let started = start(&mut conn, json!({"items": 1})).await;
    assert_eq!(started["state"], "running");
    let id = &started["job_id"];
    let refused = call(&mut conn, "job_report", json!({"job_id": id})).await;
    assert_eq!(error_code(&refused), NOT_FINISHED, "{refused}");
    assert_eq!(refused["error"]["data"]["state"], "running");
    let status = structured(&call(&mut conn, "job_status", json!({"job_id": id})).await);
    assert_eq!(
        (&status["state"], &status["processed"]),
        (&json!("running"), &json!(0))
    );
    for bad in [json!({"items": 0}), json!({"items": 1001}), json!({})] {
        let answer = call(&mut conn, "job_start", bad.clone()).await;
        assert_eq!(error_code(&answer), INVALID_PARAMS, "{bad}: {answer}");
    }
    let stats = conn.stats().await;
    assert_eq!(
        jobs(&stats),
        jobs_expected(&[
            ("created", 1),
            ("polls", 1),
            ("reports_unfinished", 1),
            ("live", 1)
        ])
    );
}

#[tokio::test]
async fn failing_items_make_a_job_partial_or_failed() {
    for (fail_every, state, failed) in [(3, "partial", 3), (1, "failed", 10), (11, "succeeded", 0)]
    {
        let target = start_http(ServeConfig {
            job_item_ms: 1,
            job_poll_interval_ms: 5,
            job_fail_every: fail_every,
            ..ServeConfig::default()
        })
        .await
        .unwrap();
        let mut conn = Conn::open(target.addr()).await;
        let id = start(&mut conn, json!({"items": 10})).await["job_id"].clone();
        let seen = wait_terminal(&mut conn, id.as_str().unwrap()).await;
        assert_eq!(seen.last().unwrap()["state"], state);
        let report = structured(&call(&mut conn, "job_report", json!({"job_id": id})).await);
        assert_eq!(report["state"], state, "{report}");
        assert_eq!(report["failed"], failed, "{report}");
        assert_eq!(report["succeeded"], 10 - failed, "{report}");
        let failed_at: Vec<u64> = report["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["outcome"] == "failed")
            .map(|i| i["index"].as_u64().unwrap())
            .collect();
        let want: Vec<u64> = (0..10).filter(|i| (i + 1) % fail_every == 0).collect();
        assert_eq!(failed_at, want, "fail every {fail_every}");
    }
}

/// The lossy report, through the real binary so that its flags are checked too.
#[tokio::test]
async fn a_lossy_report_leaves_items_out_and_stats_count_them() {
    let server = serve(&[
        "--job-item-ms",
        "1",
        "--job-poll-interval-ms",
        "5",
        "--job-fail-every",
        "5",
        "--job-lose-every",
        "4",
    ]);
    let addr: SocketAddr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let mut conn = Conn::open(addr).await;
    let mut polls = 0;
    // 3 items: shorter than the period, nothing lost. 10: items 3 and 7 lost, 4 and 9 fail.
    // 12: 3, 7, 11 lost, 4 and 9 fail.
    let mut reports = Vec::new();
    for items in [3u64, 10, 12] {
        let id = start(&mut conn, json!({"items": items})).await["job_id"].clone();
        polls += wait_terminal(&mut conn, id.as_str().unwrap()).await.len() as u64;
        let report = structured(&call(&mut conn, "job_report", json!({"job_id": id})).await);
        reports.push((items, report));
    }
    let mut lost_total = 0;
    for (items, report) in &reports {
        let (succeeded, failed) = (
            report["succeeded"].as_u64().unwrap(),
            report["failed"].as_u64().unwrap(),
        );
        let listed = report["items"].as_array().unwrap();
        assert_eq!(listed.len() as u64, succeeded + failed, "{report}");
        assert_eq!(report["total"], *items);
        let lost = items / 4;
        lost_total += lost;
        assert_eq!(succeeded + failed, items - lost, "{report}");
        assert!(
            listed
                .iter()
                .all(|i| (i["index"].as_u64().unwrap() + 1) % 4 != 0)
        );
        // The state tells the truth about every item, lost ones included.
        assert_eq!(
            report["state"],
            if *items >= 5 { "partial" } else { "succeeded" }
        );
    }
    assert_eq!(reports[1].1["failed"], 2);
    let stats = conn.stats().await;
    assert_eq!(
        jobs(&stats),
        jobs_expected(&[
            ("created", 3),
            ("polls", polls),
            ("reports_read", 3),
            ("reports_lossy", 2),
            ("items_lost", lost_total),
            ("live", 3),
        ]),
        "{stats}"
    );
    assert_eq!(lost_total, 5);
}

#[tokio::test]
async fn a_request_key_replays_the_same_input_and_refuses_another() {
    let target = start_http(ServeConfig::default()).await.unwrap();
    let mut conn = Conn::open(target.addr()).await;
    let first = start(&mut conn, json!({"items": 5, "request_key": "order-1"})).await;
    let again = start(&mut conn, json!({"items": 5, "request_key": "order-1"})).await;
    assert_eq!(first["job_id"], again["job_id"]);
    let conflict = call(
        &mut conn,
        "job_start",
        json!({"items": 6, "request_key": "order-1"}),
    )
    .await;
    assert_eq!(error_code(&conflict), KEY_CONFLICT, "{conflict}");
    assert_eq!(conflict["error"]["data"]["job_id"], first["job_id"]);
    let other = start(&mut conn, json!({"items": 6, "request_key": "order-2"})).await;
    assert_ne!(other["job_id"], first["job_id"]);
    let unkeyed = start(&mut conn, json!({"items": 5})).await;
    assert_ne!(unkeyed["job_id"], first["job_id"]);
    let stats = conn.stats().await;
    assert_eq!(
        jobs(&stats),
        jobs_expected(&[
            ("created", 3),
            ("replays", 1),
            ("conflicts", 1),
            ("live", 3)
        ])
    );
}

#[tokio::test]
async fn unknown_and_expired_jobs_are_invalid_params() {
    let target = start_http(ServeConfig {
        job_item_ms: 1,
        job_ttl_ms: 200,
        ..ServeConfig::default()
    })
    .await
    .unwrap();
    let mut conn = Conn::open(target.addr()).await;
    for (tool, id) in [("job_status", "job-999"), ("job_report", "nope")] {
        let answer = call(&mut conn, tool, json!({"job_id": id})).await;
        assert_eq!(error_code(&answer), INVALID_PARAMS, "{answer}");
    }
    let id = start(&mut conn, json!({"items": 1})).await["job_id"].clone();
    // Poll until the job is forgotten: a status at first, then the error, never back.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut polls = 0;
    loop {
        let answer = call(&mut conn, "job_status", json!({"job_id": id})).await;
        if answer.get("error").is_some() {
            assert_eq!(error_code(&answer), INVALID_PARAMS, "{answer}");
            break;
        }
        polls += 1;
        assert!(Instant::now() < deadline, "{id} never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = call(&mut conn, "job_report", json!({"job_id": id})).await;
    assert_eq!(error_code(&report), INVALID_PARAMS, "{report}");
    let stats = conn.stats().await;
    assert_eq!(
        jobs(&stats),
        jobs_expected(&[("created", 1), ("polls", polls), ("unknown_job", 4)]),
        "{stats}"
    );
}

/// Every operation's share of `/stats`, against what an independent client counted for that
/// operation, with faults spoiling answers; the shares and the unattributed part sum to the
/// totals.
#[tokio::test]
async fn per_operation_ground_truth_sums_to_the_totals_with_faults() {
    let target = start_http(ServeConfig {
        fault: "drop=5,null-id=7,duplicate=3,garbage=11".parse().unwrap(),
        job_item_ms: 1,
        ..ServeConfig::default()
    })
    .await
    .unwrap();
    let mut conn = Conn::open(target.addr()).await;
    let mut by_op: BTreeMap<String, Tally> = BTreeMap::new();
    let mut sent: BTreeMap<String, u64> = BTreeMap::new();
    // 8 requests a round and fault periods prime to 8: each operation meets several faults.
    // `initialize` is never faulted: its answer is one ok.
    let session = initialize(&mut conn, "2025-11-25").await;
    by_op.entry("initialize".into()).or_default().ok += 1;
    sent.insert("initialize".into(), 1);
    let headers = legacy_headers("2025-11-25", session.as_deref());
    let tool = |name: &str, args: Value| ("tools/call", json!({"name": name, "arguments": args}));
    let mut id = 0u64;
    for round in 0..6 {
        let ops = [
            (
                "echo",
                tool("echo", json!({"message": format!("m{round}")})),
            ),
            ("job_start", tool("job_start", json!({"items": 2}))),
            ("job_status", tool("job_status", json!({"job_id": "job-1"}))),
            ("no_such_tool", tool("no_such_tool", json!({}))),
            ("tools/list", ("tools/list", json!({}))),
            (
                "mem://item/2",
                ("resources/read", json!({"uri": "mem://item/2"})),
            ),
            (
                "greet",
                (
                    "prompts/get",
                    json!({"name": "greet", "arguments": {"name": "x"}}),
                ),
            ),
            ("ping", ("ping", json!({}))),
        ];
        for (op, (method, params)) in ops {
            id += 1;
            let reply = conn
                .post(&headers, &request(json!(id), method, params))
                .await;
            by_op
                .entry(op.into())
                .or_default()
                .exchange(&[json!(id)], &reply, false);
            *sent.entry(op.into()).or_default() += 1;
        }
    }
    // Input that is no JSON-RPC request: answered with id null, for no operation.
    let junk = conn
        .send("POST", "/mcp", &headers, b"{not json".to_vec())
        .await;
    assert_eq!(junk.status, 400);
    let stats = conn.stats().await;
    assert_identity(&stats);
    let ops = stats["operations"].as_object().unwrap();
    let names: Vec<&String> = ops.keys().collect();
    let mut want: Vec<&String> = sent.keys().collect();
    want.sort();
    assert_eq!(names, want, "{stats}");
    let mut sum = Tally::default();
    let mut requests = 0;
    for (name, client) in &by_op {
        let op = &ops[name.as_str()];
        let server = Tally::from_stats(op);
        assert_eq!(&server, client, "{name}: {op}");
        assert_eq!(op["requests"], sent[name], "{name}: {op}");
        add(&mut sum, &server);
        requests += op["requests"].as_u64().unwrap();
    }
    let unattributed =
        Tally::from_stats(&json!({"client_view": stats["client_view_unattributed"]}));
    assert_eq!(
        unattributed,
        Tally {
            null_id: 1,
            ..Tally::default()
        }
    );
    add(&mut sum, &unattributed);
    assert_eq!(sum, Tally::from_stats(&stats), "{stats}");
    assert_eq!(stats["requests_seen"], requests);
    // Each spoiling fault hit something: the check above compared non-trivial counts.
    let faults = &stats["faults"];
    for k in ["drop", "null_id", "duplicate", "garbage"] {
        assert!(faults[k].as_u64().unwrap() > 0, "{k}: {stats}");
    }
    let answered: u64 = ops
        .values()
        .map(|o| o["answered_ok"].as_u64().unwrap() + o["answered_error"].as_u64().unwrap())
        .sum();
    assert_eq!(stats["answers_sent"], answered);
    assert_eq!(ops["no_such_tool"]["answered_ok"], 0);
}

fn add(sum: &mut Tally, t: &Tally) {
    sum.ok += t.ok;
    sum.errors += t.errors;
    sum.both_result_error += t.both_result_error;
    sum.invalid_jsonrpc += t.invalid_jsonrpc;
    sum.duplicate_id += t.duplicate_id;
    sum.unknown_id += t.unknown_id;
    sum.null_id += t.null_id;
    sum.server_messages += t.server_messages;
    sum.parse_errors += t.parse_errors;
    sum.missing += t.missing;
    sum.http_other += t.http_other;
    sum.response_count_mismatch += t.response_count_mismatch;
}
