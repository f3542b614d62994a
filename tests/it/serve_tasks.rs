//! The built-in target's tasks, input-required rounds and progress faults, over real HTTP
//! and stdio, under both revisions that have tasks: 2025-11-25 (core tasks: `params.task`,
//! `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list`) and 2026-07-28 (the
//! `io.modelcontextprotocol/tasks` extension: `resultType: "task"`, `tasks/get` inlining
//! the result, `tasks/update`, `tasks/cancel`; MRTR `input_required` results). Each task
//! fault is tallied by an independent client here and compared with `/stats` exactly.
//! Nothing depends on timing: tasks of 0 ms are over when first polled, long ones (10
//! minutes) are never over while a test runs, and waits are polls within a bound.

use crate::support::http_client::*;
use mcpload::server::{AnswerMode, ServeConfig, StatsSnapshot, serve_stdio, start_http};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

const LEGACY: &str = "2025-11-25";
const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";
const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;
const MISSING_CAPABILITY: i64 = -32021;
/// Work that is not over while any test runs.
const LONG_MS: u64 = 600_000;
const EXAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp-2026-07-28-examples"
);

/// An official 2026-07-28 schema example (copied into the fixtures).
fn example(kind: &str, file: &str) -> Value {
    let path = format!("{EXAMPLES}/{kind}/{file}");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Every client capability the target's methods look at.
fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}, "extensions": {TASKS_EXT: {}}})
}

enum Wire {
    Http {
        conn: Conn,
        session: Option<String>,
    },
    Stdio {
        w: WriteHalf<DuplexStream>,
        lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
        served: tokio::task::JoinHandle<StatsSnapshot>,
    },
}

/// A client of one revision over one transport; `caps` are the 2026-07-28 client
/// capabilities it declares on each request.
struct Client {
    wire: Wire,
    modern: bool,
    caps: Value,
    next: u64,
}

impl Client {
    async fn http(cfg: ServeConfig, modern: bool) -> (mcpload::server::RunningTarget, Client) {
        let target = start_http(cfg).await.unwrap();
        let mut conn = Conn::open(target.addr()).await;
        let session = if modern {
            None
        } else {
            initialize(&mut conn, LEGACY).await
        };
        let client = Client {
            wire: Wire::Http { conn, session },
            modern,
            caps: all_caps(),
            next: 1,
        };
        (target, client)
    }

    async fn stdio(cfg: ServeConfig, modern: bool) -> Client {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_r, server_w) = tokio::io::split(server);
        let served =
            tokio::spawn(async move { serve_stdio(cfg, server_r, server_w).await.unwrap() });
        let (r, w) = tokio::io::split(client);
        let mut c = Client {
            wire: Wire::Stdio {
                w,
                lines: BufReader::new(r).lines(),
                served,
            },
            modern,
            caps: all_caps(),
            next: 1,
        };
        if !modern {
            let init = initialize_request(json!(0), LEGACY);
            let answer = c.exchange(&init).await;
            assert_eq!(answer["result"]["protocolVersion"], LEGACY, "{answer}");
            c.line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
        }
        c
    }

    async fn line(&mut self, v: &Value) {
        let Wire::Stdio { w, .. } = &mut self.wire else {
            unreachable!("stdio only")
        };
        w.write_all(format!("{v}\n").as_bytes()).await.unwrap();
    }

    /// Writes a stdio request and reads lines up to its answer (notifications skipped).
    async fn exchange(&mut self, req: &Value) -> Value {
        self.line(req).await;
        let Wire::Stdio { lines, .. } = &mut self.wire else {
            unreachable!("stdio only")
        };
        loop {
            let l = tokio::time::timeout(DEADLINE, lines.next_line())
                .await
                .expect("an answer within the deadline")
                .unwrap()
                .expect("the server answers");
            let v: Value = serde_json::from_str(&l).unwrap();
            if v.get("method").is_none() {
                return v;
            }
        }
    }

    /// One request; its HTTP status (stdio: 200) and its JSON-RPC answer.
    async fn call(&mut self, method: &str, mut params: Value) -> (u16, Value) {
        let id = json!(self.next);
        self.next += 1;
        if self.modern {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": self.caps,
                "io.modelcontextprotocol/clientInfo": {"name": "serve-tasks", "version": "1"},
            });
        }
        let body = request(id, method, params.clone());
        match &mut self.wire {
            Wire::Http { conn, session } => {
                let headers = if self.modern {
                    let mut hs = base_headers();
                    hs.extend(h(&[
                        ("mcp-protocol-version", MODERN),
                        ("mcp-method", method),
                    ]));
                    let name = match method {
                        "tools/call" => params["name"].as_str(),
                        "tasks/get" | "tasks/update" | "tasks/cancel" => params["taskId"].as_str(),
                        _ => None,
                    };
                    if let Some(n) = name {
                        hs.push(("mcp-name".into(), n.into()));
                    }
                    hs
                } else {
                    legacy_headers(LEGACY, session.as_deref())
                };
                let reply = conn.post(&headers, &body).await;
                (reply.status, reply.json())
            }
            Wire::Stdio { .. } => (200, self.exchange(&body).await),
        }
    }

    async fn ok(&mut self, method: &str, params: Value) -> Value {
        let (status, answer) = self.call(method, params).await;
        assert_eq!(status, 200, "{answer}");
        assert!(answer.get("result").is_some(), "{method}: {answer}");
        answer["result"].clone()
    }

    async fn error(&mut self, method: &str, params: Value) -> (u16, i64, Value) {
        let (status, answer) = self.call(method, params).await;
        let code = answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method}: an error expected: {answer}"));
        (status, code, answer["error"].clone())
    }

    /// Calls a task tool as a task (2025-11-25: `params.task`; 2026-07-28: the declared
    /// extension) and returns the task's fields.
    async fn create(&mut self, tool: &str, args: Value) -> Value {
        let mut params = json!({"name": tool, "arguments": args});
        if !self.modern {
            params["task"] = json!({"ttl": 60_000});
        }
        let r = self.ok("tools/call", params).await;
        let task = if self.modern {
            assert_eq!(r["resultType"], "task", "{r}");
            r
        } else {
            assert!(r.get("resultType").is_none(), "{r}");
            r["task"].clone()
        };
        assert_eq!(task["status"], "working", "tasks begin working: {task}");
        let (ttl, poll) = self.names();
        assert!(task[ttl].is_u64() && task[poll].is_u64(), "{task}");
        for k in ["taskId", "createdAt", "lastUpdatedAt"] {
            assert!(task[k].is_string(), "{k}: {task}");
        }
        task
    }

    /// What the revision calls `ttl` and `pollInterval`.
    fn names(&self) -> (&'static str, &'static str) {
        if self.modern {
            ("ttlMs", "pollIntervalMs")
        } else {
            ("ttl", "pollInterval")
        }
    }

    /// Polls `tasks/get` until the task is terminal (bounded); the statuses seen.
    async fn until_terminal(&mut self, id: &Value) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        loop {
            let t = self.ok("tasks/get", json!({"taskId": id})).await;
            let done = t["status"] != "working";
            let interval = t[self.names().1].as_u64().unwrap();
            seen.push(t);
            if done {
                return seen;
            }
            assert!(Instant::now() < deadline, "{id} never ended: {seen:?}");
            tokio::time::sleep(Duration::from_millis(interval)).await;
        }
    }

    async fn finish(self) -> Option<StatsSnapshot> {
        match self.wire {
            Wire::Http { .. } => None,
            Wire::Stdio {
                mut w,
                served,
                mut lines,
            } => {
                w.shutdown().await.unwrap();
                while lines.next_line().await.unwrap().is_some() {}
                Some(served.await.unwrap())
            }
        }
    }
}

async fn stats_of(target: &mcpload::server::RunningTarget) -> Value {
    serde_json::to_value(target.stats()).unwrap()
}

/// The task counters expected: zero but those given.
fn tasks_expected(set: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = [
        "created",
        "completed",
        "failed",
        "cancelled",
        "expired",
        "polls",
        "results",
        "cancels",
        "cancels_too_late",
        "updates",
        "lists",
        "unknown_task",
        "refused_full",
        "status_notifications",
        "working",
        "working_max",
        "held",
    ]
    .iter()
    .map(|k| (k.to_string(), 0))
    .collect();
    for (k, v) in set {
        *out.get_mut(*k).unwrap_or_else(|| panic!("{k}")) = *v;
    }
    out
}

fn tasks_of(stats: &Value) -> BTreeMap<String, u64> {
    stats["tasks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "faults")
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

#[tokio::test]
async fn legacy_tasks_live_to_each_terminal_state() {
    let cfg = ServeConfig {
        task_poll_interval_ms: 5,
        ..ServeConfig::default()
    };
    let (target, mut c) = Client::http(cfg, false).await;
    // Capabilities and tool-level negotiation, as 2025-11-25 declares them.
    let mut conn = Conn::open(target.addr()).await;
    let init = conn
        .post(&base_headers(), &initialize_request(json!(1), LEGACY))
        .await
        .json();
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let tools = c.ok("tools/list", json!({})).await;
    let support: BTreeMap<&str, &Value> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), &t["execution"]["taskSupport"]))
        .collect();
    assert_eq!(support["slow_task"], "optional");
    assert_eq!(support["task_only"], "required");
    assert_eq!(support["echo"], &Value::Null);
    assert!(
        !support.contains_key("ask_input"),
        "MRTR is 2026-07-28 only"
    );

    let mut polls = 0;
    let mut ids = Vec::new();
    for (outcome, status) in [
        ("completed", "completed"),
        ("tool_error", "failed"),
        ("failed", "failed"),
    ] {
        let task = c
            .create("slow_task", json!({"ms": 0, "outcome": outcome}))
            .await;
        assert_eq!(task["ttl"], 60_000, "the ttl asked for is kept");
        let id = task["taskId"].clone();
        let seen = c.until_terminal(&id).await;
        polls += seen.len() as u64;
        let last = seen.last().unwrap();
        assert_eq!(last["status"], status, "{outcome}: {last}");
        assert!(
            last.get("result").is_none(),
            "2025-11-25 inlines nothing: {last}"
        );
        let (_, answer) = c.call("tasks/result", json!({"taskId": id})).await;
        match outcome {
            "failed" => assert_eq!(answer["error"]["code"], -32603, "{answer}"),
            _ => {
                let r = &answer["result"];
                assert_eq!(r["isError"], outcome == "tool_error", "{answer}");
                assert_eq!(
                    r["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                    id
                );
            }
        }
        ids.push(id);
    }
    // A task cancelled while it works; a second cancel is refused, it has no result.
    let long = c.create("task_only", json!({"ms": LONG_MS})).await;
    let id = long["taskId"].clone();
    let cancelled = c.ok("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["status"], "cancelled");
    let (_, code, _) = c.error("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(code, INVALID_PARAMS);
    let (_, code, _) = c.error("tasks/result", json!({"taskId": id})).await;
    assert_eq!(code, INVALID_PARAMS);
    ids.push(id);
    let listed = c.ok("tasks/list", json!({})).await;
    let listed: Vec<&Value> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["taskId"])
        .collect();
    assert_eq!(listed, ids.iter().collect::<Vec<_>>());
    // Negotiation errors: required without a task, a task on a tool that forbids it, an
    // unknown task, and the 2026-07-28 method.
    let (_, code, _) = c
        .error(
            "tools/call",
            json!({"name": "task_only", "arguments": {"ms": 0}}),
        )
        .await;
    assert_eq!(code, METHOD_NOT_FOUND);
    let (_, code, _) = c
        .error(
            "tools/call",
            json!({"name": "echo", "arguments": {}, "task": {}}),
        )
        .await;
    assert_eq!(code, METHOD_NOT_FOUND);
    let (_, code, _) = c.error("tasks/get", json!({"taskId": "nope"})).await;
    assert_eq!(code, INVALID_PARAMS);
    let (_, code, _) = c.error("tasks/update", json!({"taskId": "nope"})).await;
    assert_eq!(code, METHOD_NOT_FOUND);
    // Without params.task, slow_task answers at once.
    let now = c
        .ok(
            "tools/call",
            json!({"name": "slow_task", "arguments": {"ms": 0}}),
        )
        .await;
    assert_eq!(now["content"][0]["text"], "slept 0 ms");
    let stats = stats_of(&target).await;
    assert_eq!(
        tasks_of(&stats),
        tasks_expected(&[
            ("created", 4),
            ("completed", 1),
            ("failed", 2),
            ("cancelled", 1),
            ("polls", polls),
            ("results", 4),
            ("cancels", 1),
            ("cancels_too_late", 1),
            ("lists", 1),
            ("unknown_task", 1),
            ("working_max", 1),
            ("held", 4),
        ]),
        "{stats}"
    );
}

#[tokio::test]
async fn modern_tasks_follow_the_extension() {
    let cfg = ServeConfig {
        task_poll_interval_ms: 5,
        ..ServeConfig::default()
    };
    let (target, mut c) = Client::http(cfg, true).await;
    let d = c.ok("server/discover", json!({})).await;
    assert_eq!(
        d["capabilities"]["extensions"],
        example("ServerCapabilities", "extensions-tasks.json")["extensions"]
    );
    assert!(
        d["capabilities"].get("tasks").is_none(),
        "no legacy capability: {d}"
    );
    let tools = c.ok("tools/list", json!({})).await;
    for t in tools["tools"].as_array().unwrap() {
        assert!(
            t.get("execution").is_none(),
            "2026-07-28 has no execution: {t}"
        );
    }
    let mut polls = 0;
    for (outcome, status, inline) in [
        ("completed", "completed", "result"),
        ("tool_error", "completed", "result"),
        ("failed", "failed", "error"),
    ] {
        let task = c
            .create("slow_task", json!({"ms": 0, "outcome": outcome}))
            .await;
        let seen = c.until_terminal(&task["taskId"]).await;
        polls += seen.len() as u64;
        let last = seen.last().unwrap();
        assert_eq!(last["resultType"], "complete", "{last}");
        assert_eq!(last["status"], status, "{outcome}: {last}");
        assert!(last.get(inline).is_some(), "{outcome}: {last}");
        if inline == "result" {
            assert_eq!(last["result"]["isError"], outcome == "tool_error");
        }
    }
    // Cancel is an acknowledgement; the task then reads cancelled.
    let task = c.create("task_only", json!({"ms": LONG_MS})).await;
    let id = task["taskId"].clone();
    let ack = c.ok("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack, json!({"resultType": "complete"}));
    assert_eq!(
        c.ok("tasks/get", json!({"taskId": id})).await["status"],
        "cancelled"
    );
    polls += 1;
    let ack = c
        .ok("tasks/update", json!({"taskId": id, "inputResponses": {}}))
        .await;
    assert_eq!(ack, json!({"resultType": "complete"}));
    // What the extension removed, and what it refuses.
    for method in ["tasks/result", "tasks/list"] {
        let (status, code, _) = c.error(method, json!({"taskId": id})).await;
        assert_eq!((status, code), (404, METHOD_NOT_FOUND), "{method}");
    }
    c.caps = json!({});
    let (status, code, e) = c
        .error(
            "tools/call",
            json!({"name": "task_only", "arguments": {"ms": 0}}),
        )
        .await;
    assert_eq!((status, code), (400, MISSING_CAPABILITY));
    assert_eq!(
        e["data"]["requiredCapabilities"],
        json!({"extensions": {TASKS_EXT: {}}})
    );
    let (status, code, _) = c.error("tasks/get", json!({"taskId": id})).await;
    assert_eq!((status, code), (400, MISSING_CAPABILITY));
    let now = c
        .ok(
            "tools/call",
            json!({"name": "slow_task", "arguments": {"ms": 0}}),
        )
        .await;
    assert_eq!(
        now["resultType"], "complete",
        "no task without the extension: {now}"
    );
    // Mcp-Name must carry the taskId.
    let Wire::Http { conn, .. } = &mut c.wire else {
        unreachable!()
    };
    let (mut hs, body) = modern(json!(99), "tasks/get", json!({"taskId": id}));
    hs.push(("mcp-name".into(), "another-task".into()));
    let reply = conn.post(&hs, &body).await;
    assert_eq!(
        (reply.status, &reply.json()["error"]["code"]),
        (400, &json!(-32020))
    );
    let stats = stats_of(&target).await;
    assert_eq!(
        tasks_of(&stats),
        tasks_expected(&[
            ("created", 4),
            ("completed", 2),
            ("failed", 1),
            ("cancelled", 1),
            ("polls", polls),
            ("cancels", 1),
            ("updates", 1),
            ("working_max", 1),
            ("held", 4),
        ]),
        "{stats}"
    );
}

#[tokio::test]
async fn a_task_capacity_queues_the_tasks_beyond_it() {
    let cfg = ServeConfig {
        task_capacity: 1,
        ..ServeConfig::default()
    };
    let (target, mut c) = Client::http(cfg, true).await;
    let first = c.create("slow_task", json!({"ms": LONG_MS})).await;
    let second = c.create("slow_task", json!({"ms": 0})).await;
    let a = c.ok("tasks/get", json!({"taskId": first["taskId"]})).await;
    let b = c.ok("tasks/get", json!({"taskId": second["taskId"]})).await;
    assert_eq!(
        (&a["status"], &a["statusMessage"]),
        (&json!("working"), &json!("working"))
    );
    assert_eq!(
        b["status"], "working",
        "a 0 ms task waits for the slot: {b}"
    );
    assert_eq!(b["statusMessage"], "queued: waiting for a task slot");
    let stats = stats_of(&target).await;
    assert_eq!(stats["tasks"]["working"], 2);
    assert_eq!(stats["tasks"]["working_max"], 2);
}

/// An `inputResponses` map answering `keys` with the official example results.
fn responses(keys: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for k in keys {
        let v = match k.split('-').next().unwrap() {
            "elicitation" => example("ElicitResult", "input-single-field.json"),
            "sampling" => example("CreateMessageResult", "text-response.json"),
            _ => example("ListRootsResult", "single-root-directory.json"),
        };
        out.insert(k.to_string(), v);
    }
    Value::Object(out)
}

#[tokio::test]
async fn input_rounds_then_complete_or_become_a_task() {
    let (target, mut c) = Client::http(ServeConfig::default(), true).await;
    let args = json!({"rounds": 2, "kinds": ["elicitation", "sampling", "roots"]});
    let call = |extra: Value| {
        let mut p = json!({"name": "ask_input", "arguments": args});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let first = c.ok("tools/call", call(json!({}))).await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let requests = first["inputRequests"].as_object().unwrap();
    let keys: Vec<&str> = requests.keys().map(String::as_str).collect();
    assert_eq!(keys, ["elicitation-1", "roots-1", "sampling-1"]);
    // Each request has the shape of the official example of its kind.
    let official = example(
        "InputRequests",
        "elicitation-and-sampling-input-requests.json",
    );
    for (key, model) in [
        ("elicitation-1", "github_login"),
        ("sampling-1", "capital_of_france"),
    ] {
        assert_eq!(requests[key]["method"], official[model]["method"]);
        let mine: HashSet<&String> = requests[key]["params"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        let theirs: HashSet<&String> = official[model]["params"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(mine, theirs, "{key}");
    }
    assert_eq!(requests["roots-1"]["method"], "roots/list");
    let state = first["requestState"].clone();
    // Invalid retries: a key left out is asked again; a bad shape, an altered state, a
    // state from another call, and responses without a state are refused.
    let partial = c
        .ok("tools/call", call(json!({"inputResponses": responses(&["elicitation-1", "roots-1"]), "requestState": state})))
        .await;
    assert_eq!(partial["resultType"], "input_required");
    assert_eq!(partial["requestState"], state);
    let mut bad = responses(&["elicitation-1", "sampling-1", "roots-1"]);
    bad["elicitation-1"] = example("ElicitResult", "accept-url-mode-no-content.json");
    let (_, code, _) = c
        .error(
            "tools/call",
            call(json!({"inputResponses": bad, "requestState": state})),
        )
        .await;
    assert_eq!(code, INVALID_PARAMS);
    let all1 = responses(&["elicitation-1", "sampling-1", "roots-1"]);
    let altered = format!("{}0", state.as_str().unwrap());
    let other = example(
        "InputRequiredResult",
        "input-required-result-with-request-state-only.json",
    )["requestState"]
        .clone();
    for s in [json!(altered), other] {
        let (_, code, _) = c
            .error(
                "tools/call",
                call(json!({"inputResponses": all1, "requestState": s})),
            )
            .await;
        assert_eq!(code, INVALID_PARAMS);
    }
    let (_, code, _) = c
        .error("tools/call", call(json!({"inputResponses": all1})))
        .await;
    assert_eq!(code, INVALID_PARAMS);
    // Two valid rounds, then the result.
    let second = c
        .ok(
            "tools/call",
            call(json!({"inputResponses": all1, "requestState": state})),
        )
        .await;
    assert_eq!(second["resultType"], "input_required");
    assert!(
        second["inputRequests"].get("elicitation-2").is_some(),
        "{second}"
    );
    let done = c
        .ok(
            "tools/call",
            call(json!({
                "inputResponses": responses(&["elicitation-2", "sampling-2", "roots-2"]),
                "requestState": second["requestState"],
            })),
        )
        .await;
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(
        done["content"][0]["text"],
        "answered 2 round(s) of elicitation, sampling, roots"
    );
    // One round, then a task.
    let to_task = json!({"name": "ask_input", "arguments": {"then": "task", "ms": 0}});
    let asked = c.ok("tools/call", to_task.clone()).await;
    let mut retry = to_task.clone();
    retry["inputResponses"] = responses(&["elicitation-1"]);
    retry["requestState"] = asked["requestState"].clone();
    let task = c.ok("tools/call", retry).await;
    assert_eq!(
        (&task["resultType"], &task["status"]),
        (&json!("task"), &json!("working"))
    );
    let seen = c.until_terminal(&task["taskId"]).await;
    assert_eq!(seen.last().unwrap()["status"], "completed");
    // Capabilities: each kind needs its own, `then = task` needs the extension.
    c.caps = json!({"elicitation": {}});
    let (status, code, e) = c
        .error("tools/call", json!({"name": "ask_input", "arguments": {"kinds": ["sampling", "roots"], "then": "task"}}))
        .await;
    assert_eq!((status, code), (400, MISSING_CAPABILITY));
    assert_eq!(
        e["data"]["requiredCapabilities"],
        json!({"sampling": {}, "roots": {}, "extensions": {TASKS_EXT: {}}})
    );
    let stats = stats_of(&target).await;
    assert_eq!(
        stats["input"],
        json!({
            "rounds_asked": 4,
            "rounds_answered": 3,
            "responses_missing": 1,
            "responses_invalid": 1,
            "state_invalid": 3,
            "completed": 1,
            "to_task": 1,
        }),
        "{stats}"
    );
}

/// What an independent client counts of the task anomalies, by `/stats` name.
#[derive(Debug, Default, PartialEq, Eq)]
struct Anomalies {
    forget: u64,
    reuse_id: u64,
    never_ends: u64,
    regress: u64,
    mismatch: u64,
    get_error: u64,
}

impl Anomalies {
    fn of(stats: &Value) -> Anomalies {
        let f = &stats["tasks"]["faults"];
        let g = |k: &str| f[k].as_u64().unwrap_or_else(|| panic!("{k}: {stats}"));
        Anomalies {
            forget: g("forget"),
            reuse_id: g("reuse_id"),
            never_ends: g("never_ends"),
            regress: g("regress"),
            mismatch: g("mismatch"),
            get_error: g("get_error"),
        }
    }
}

/// Creates `n` tasks of 0 ms (every third a failure) and follows each: polls until it is
/// terminal, then once more; reads its result (2025-11-25: `tasks/result`). A task still
/// working after 3 polls never ends (0 ms tasks are over when first polled).
async fn tally_task_faults(c: &mut Client, n: u64) -> Anomalies {
    let mut seen = Anomalies::default();
    let mut ids = HashSet::new();
    for i in 0..n {
        let outcome = if i % 3 == 2 { "failed" } else { "completed" };
        let task = c
            .create("slow_task", json!({"ms": 0, "outcome": outcome}))
            .await;
        let id = task["taskId"].clone();
        if !ids.insert(id.to_string()) {
            seen.reuse_id += 1;
        }
        let mut polls_working = 0;
        let mut terminal: Option<Value> = None;
        let mut regressed = false;
        let mut forgotten = false;
        loop {
            let (_, answer) = c.call("tasks/get", json!({"taskId": id})).await;
            if let Some(e) = answer.get("error") {
                if e["code"] == -32603 {
                    seen.get_error += 1;
                    continue;
                }
                assert_eq!(e["code"], INVALID_PARAMS, "{answer}");
                forgotten = true;
                break;
            }
            let t = &answer["result"];
            match (&terminal, t["status"].as_str().unwrap()) {
                (None, "working") => {
                    polls_working += 1;
                    if polls_working == 3 {
                        seen.never_ends += 1;
                        break;
                    }
                }
                (None, _) => terminal = Some(t.clone()),
                (Some(_), "working") => {
                    regressed = true;
                    break;
                }
                (Some(_), _) => break,
            }
        }
        if forgotten {
            seen.forget += 1;
            continue;
        }
        seen.regress += u64::from(regressed);
        let Some(t) = terminal else { continue };
        let status = t["status"].as_str().unwrap();
        let failed_payload = if c.modern {
            t.get("error").is_some()
        } else {
            let (_, r) = c.call("tasks/result", json!({"taskId": id})).await;
            r.get("error").is_some()
        };
        if (status == "failed") != failed_payload {
            seen.mismatch += 1;
        }
    }
    seen
}

fn fault_cfg() -> ServeConfig {
    ServeConfig {
        task_poll_interval_ms: 1,
        task_fault: "forget=7,reuse-id=5,never-ends=6,regress=4,mismatch=3,get-error=9"
            .parse()
            .unwrap(),
        ..ServeConfig::default()
    }
}

#[tokio::test]
async fn each_task_fault_is_counted_exactly_over_http_both_revisions() {
    for modern in [false, true] {
        let (target, mut c) = Client::http(fault_cfg(), modern).await;
        let seen = tally_task_faults(&mut c, 24).await;
        let stats = stats_of(&target).await;
        assert_eq!(Anomalies::of(&stats), seen, "modern {modern}: {stats}");
        // Every kind fired: the comparison was not of zeros.
        for (k, n) in [
            ("forget", seen.forget),
            ("reuse_id", seen.reuse_id),
            ("never_ends", seen.never_ends),
            ("regress", seen.regress),
            ("mismatch", seen.mismatch),
            ("get_error", seen.get_error),
        ] {
            assert!(n > 0, "{k} never fired (modern {modern})");
        }
        assert_eq!(stats["tasks"]["created"], 24);
    }
}

#[tokio::test]
async fn each_task_fault_is_counted_exactly_over_stdio_both_revisions() {
    for modern in [false, true] {
        let mut c = Client::stdio(fault_cfg(), modern).await;
        let seen = tally_task_faults(&mut c, 24).await;
        let stats = serde_json::to_value(c.finish().await.unwrap()).unwrap();
        assert_eq!(Anomalies::of(&stats), seen, "modern {modern}: {stats}");
        assert!(seen.regress > 0 && seen.mismatch > 0 && seen.forget > 0);
    }
}

#[tokio::test]
async fn progress_faults_are_counted_exactly() {
    let cfg = ServeConfig {
        answer: AnswerMode::Sse,
        progress_fault: "after-result=2,down=3,unknown-token=4".parse().unwrap(),
        ..ServeConfig::default()
    };
    let target = start_http(cfg).await.unwrap();
    let mut conn = Conn::open(target.addr()).await;
    let (mut sent, mut after, mut down, mut unknown) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..12 {
        let token = format!("tok-{i}");
        let (hs, body) = modern(
            json!(i),
            "tools/call",
            json!({"name": "progress", "arguments": {"steps": 3, "ms": 0},
                   "_meta": {"progressToken": token}}),
        );
        // `modern` replaces _meta: put the token back in.
        let mut body = body;
        body["params"]["_meta"]["progressToken"] = json!(token);
        let reply = conn.post(&hs, &body).await;
        assert!(reply.is_sse());
        let mut answered = false;
        let mut last = f64::MIN;
        for payload in reply.payloads() {
            let v: Value = serde_json::from_slice(&payload).unwrap();
            if v.get("id").is_some() {
                answered = true;
                continue;
            }
            assert_eq!(v["method"], "notifications/progress");
            sent += 1;
            let p = &v["params"];
            if p["progressToken"] != json!(token) {
                unknown += 1;
                continue;
            }
            if answered {
                after += 1;
            }
            let value = p["progress"].as_f64().unwrap();
            if value < last {
                down += 1;
            }
            last = value;
        }
        assert!(answered);
    }
    let stats = serde_json::to_value(target.stats()).unwrap();
    assert_eq!(
        stats["progress"],
        json!({"sent": sent, "after_result": after, "down": down, "unknown_token": unknown}),
        "{stats}"
    );
    assert_eq!((after, down, unknown), (6, 4, 3));
}
