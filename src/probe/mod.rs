//! `mcpload probe`: before any load, how a server treats the cases that break pairing. Each
//! probe of docs/metrics.md sends a small fixed exchange and reports a one-word verdict with its
//! evidence (status, content type, ids answered). Verdicts are pure functions of what was
//! observed ([`Observed`]), tested on their own; the exchanges run over the real transport.
//! Task and input-required support are probed in [`tasks`].
//! The race checks of `--races` are in [`races`]; the head-of-line blocking check of
//! `--isolation` in [`isolation`].

pub mod isolation;
pub mod races;
mod render;
mod tasks;

pub use render::render_table;
pub use tasks::{
    Answer, InputTrip, TaskOffer, TaskTrip, ToolTasks, task_offer, verdict_input, verdict_task,
};

use crate::client::{Connected, Connector, McpError, Operation, ServerInfo, ToolInfo};
use crate::jsonrpc::{BatchWriter, Id, codes};
use crate::load::schema_args::arguments_for;
use crate::transport::{AnyTransport, Event, McpHeaders, Outgoing, Transport, cancel_notification};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long a slow call used by the `cancel` probe runs.
pub const SLOW_CALL: Duration = Duration::from_millis(2000);
/// When the `cancel` probe cancels its slow call.
const CANCEL_AFTER: Duration = Duration::from_millis(300);

/// Probe settings.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// How long to wait for an answer that may never come (silence is a verdict).
    pub wait: Duration,
    /// The tool the `cancel` probe calls, and its arguments (default: a tool that sleeps,
    /// found by its name and schema).
    pub slow_call: Option<(String, Value)>,
    /// The tool the `task` probe runs as a task, and its arguments (default: one whose
    /// `execution.taskSupport` allows it, or under 2026-07-28 one named for tasks).
    pub task_call: Option<(String, Value)>,
    /// The tool the `input_required` probe calls, and its arguments (default: one named for
    /// input or elicitation).
    pub input_call: Option<(String, Value)>,
    /// The longest the `task` probe waits for its task to end (then it is cancelled), and
    /// the `input_required` probe for each answer.
    pub task_wait: Duration,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            wait: Duration::from_millis(1500),
            slow_call: None,
            task_call: None,
            input_call: None,
            task_wait: Duration::from_secs(30),
        }
    }
}

/// Everything `probe` found.
#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub target: String,
    /// `http` or `stdio`.
    pub transport: &'static str,
    pub server: ServerInfo,
    /// What the server declares of tasks.
    pub tasks: TaskOffer,
    pub probes: Vec<ProbeResult>,
}

impl ProbeReport {
    /// The result of `probe` (and `variant`), if it ran.
    pub fn get(&self, probe: &str, variant: Option<&str>) -> Option<&ProbeResult> {
        self.probes
            .iter()
            .find(|p| p.probe == probe && p.variant == variant)
    }
}

/// One probe's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeResult {
    pub probe: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<&'static str>,
    pub verdict: &'static str,
    /// A qualifier of the verdict (`in_order` / `reordered` for an answered batch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub evidence: Evidence,
}

/// What came back.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Evidence {
    /// HTTP statuses (one per POST; empty on stdio).
    pub status: Vec<u16>,
    pub content_type: Vec<String>,
    /// Ids of the responses, in arrival order (`null` for a null or absent id).
    pub answered: Vec<String>,
    /// Error codes of the error responses, in arrival order.
    pub error_codes: Vec<i64>,
    /// Requests and notifications the server sent meanwhile.
    pub server_messages: usize,
    /// Bytes that were no JSON-RPC.
    pub unreadable: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The `task` probe's round trip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskTrip>,
    /// The `input_required` probe's calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<InputTrip>,
}

/// One response as observed.
#[derive(Clone, Debug, PartialEq)]
pub struct Resp {
    /// `None`: the id was null or absent.
    pub id: Option<Id>,
    /// The `result` member.
    pub result: Option<Value>,
    pub error_code: Option<i64>,
    /// The error's `data` member.
    pub error_data: Option<Value>,
}

/// What one exchange (or two concurrent ones) brought back.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub status: Vec<u16>,
    pub content_type: Vec<String>,
    pub responses: Vec<Resp>,
    pub server_messages: usize,
    pub unreadable: usize,
    /// A transport failure, when there was one.
    pub failure: Option<String>,
}

impl Observed {
    fn add_text(&mut self, bytes: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
            self.unreadable += 1;
            return;
        };
        let members = match v {
            Value::Array(a) => a,
            one => vec![one],
        };
        for m in members {
            if m.get("method").is_some() {
                self.server_messages += 1;
                continue;
            }
            let id = m
                .get("id")
                .and_then(|i| serde_json::from_value::<Id>(i.clone()).ok());
            let error = m.get("error");
            self.responses.push(Resp {
                id,
                result: m.get("result").cloned(),
                error_code: error.map(|e| e.get("code").and_then(Value::as_i64).unwrap_or(0)),
                error_data: error.and_then(|e| e.get("data")).cloned(),
            });
        }
    }

    fn refused(&self) -> bool {
        self.status.iter().any(|s| *s >= 400)
    }

    /// The first response to `id`.
    fn response(&self, id: &Id) -> Option<&Resp> {
        self.responses.iter().find(|r| r.id.as_ref() == Some(id))
    }

    fn answered(&self, id: &Id) -> usize {
        self.responses
            .iter()
            .filter(|r| r.id.as_ref() == Some(id))
            .count()
    }

    fn null_errors(&self) -> Vec<i64> {
        self.responses
            .iter()
            .filter(|r| r.id.is_none())
            .filter_map(|r| r.error_code)
            .collect()
    }

    fn evidence(&self, note: Option<String>) -> Evidence {
        Evidence {
            status: self.status.clone(),
            content_type: self.content_type.clone(),
            answered: self
                .responses
                .iter()
                .map(|r| r.id.as_ref().map_or("null".into(), |i| i.to_string()))
                .collect(),
            error_codes: self.responses.iter().filter_map(|r| r.error_code).collect(),
            server_messages: self.server_messages,
            unreadable: self.unreadable,
            note: note.or_else(|| self.failure.clone()),
            ..Evidence::default()
        }
    }

    fn merge(mut self, o: Observed) -> Observed {
        self.status.extend(o.status);
        self.content_type.extend(o.content_type);
        self.responses.extend(o.responses);
        self.server_messages += o.server_messages;
        self.unreadable += o.unreadable;
        self.failure = self.failure.or(o.failure);
        self
    }
}

fn refusal_note(o: &Observed) -> String {
    let mut parts = Vec::new();
    if let Some(s) = o.status.iter().find(|s| **s >= 400) {
        parts.push(format!("HTTP {s}"));
    }
    for c in o.null_errors() {
        parts.push(format!("error {c}"));
    }
    if parts.is_empty() {
        "no answer".into()
    } else {
        parts.join(", ")
    }
}

/// `batch`: two calls (`a`, `b`) and a notification in one batch.
pub fn verdict_batch(o: &Observed, a: &Id, b: &Id) -> (&'static str, Option<String>) {
    let ids: Vec<&Id> = o.responses.iter().filter_map(|r| r.id.as_ref()).collect();
    if ids == [a, b] {
        return ("answered", Some("in_order".into()));
    }
    if ids == [b, a] {
        return ("answered", Some("reordered".into()));
    }
    let silent = o.responses.is_empty() && o.status.iter().all(|s| *s < 400);
    if ids.is_empty() && !silent {
        return ("rejected", Some(refusal_note(o)));
    }
    let what = if silent {
        "no answer at all".to_string()
    } else {
        format!(
            "{} of 2 answered ({} responses)",
            o.answered(a).min(1) + o.answered(b).min(1),
            ids.len()
        )
    };
    ("broken", Some(what))
}

/// `notification_only_batch`: expected no answer (202 / silence).
pub fn verdict_notification_only(o: &Observed) -> &'static str {
    if o.refused() {
        "rejected"
    } else if !o.responses.is_empty() {
        "answered"
    } else {
        "no_answer"
    }
}

/// `empty_batch`: JSON-RPC 2.0 says one Invalid Request error with a null id.
pub fn verdict_empty_batch(o: &Observed) -> &'static str {
    match o.responses.as_slice() {
        [r] if r.id.is_none() && r.error_code == Some(codes::INVALID_REQUEST) => "invalid_request",
        [] if !o.refused() => "no_answer",
        rs if o.refused() || rs.iter().all(|r| r.error_code.is_some()) => "rejected",
        _ => "other",
    }
}

/// `id_collision`: two requests with the same id in flight at once.
pub fn verdict_id_collision(o: &Observed, id: &Id) -> &'static str {
    match o.answered(id) {
        0 => "rejected",
        1 => "one_lost",
        _ => "both_answered",
    }
}

/// `null_id_request`: a request with `"id": null`.
pub fn verdict_null_id(o: &Observed) -> &'static str {
    if o.responses.iter().any(|r| r.error_code.is_some()) || o.refused() {
        "rejected_with_error"
    } else if o.responses.iter().any(|r| r.result.is_some()) {
        "answered"
    } else {
        "silent"
    }
}

/// `malformed_json`: a body that is not JSON.
pub fn verdict_malformed(o: &Observed) -> &'static str {
    match o.responses.as_slice() {
        [] if !o.refused() => "silent",
        [r] if r.id.is_none() && r.error_code == Some(codes::PARSE_ERROR) => {
            "parse_error_with_null_id"
        }
        _ => "other",
    }
}

/// `unknown_method`: -32601 expected (and HTTP 404 under 2026-07-28 HTTP).
pub fn verdict_unknown_method(o: &Observed, id: &Id, want_404: bool) -> &'static str {
    let found = o
        .responses
        .iter()
        .any(|r| r.id.as_ref() == Some(id) && r.error_code == Some(codes::METHOD_NOT_FOUND));
    if !found {
        return if o.responses.is_empty() && !o.refused() {
            "silent"
        } else {
            "other"
        };
    }
    if want_404 && !o.status.contains(&404) {
        "wrong_status"
    } else {
        "method_not_found"
    }
}

/// Runs every probe against the target.
pub async fn run(connector: &Connector, opts: &ProbeOptions) -> Result<ProbeReport, McpError> {
    let Connected { server, transport } = connector.connect().await?;
    let mut p = Prober {
        transport,
        server: server.clone(),
        wait: opts.wait,
    };
    let mut probes = Vec::new();
    let call = p.sample_call()?;
    probes.push(p.batch(&call).await?);
    probes.push(p.notification_only_batch().await);
    probes.push(p.empty_batch().await);
    probes.push(p.id_collision_batch(&call).await?);
    probes.push(p.id_collision_concurrent(&call).await?);
    probes.push(p.null_id().await);
    probes.push(p.malformed().await);
    probes.push(p.unknown_method().await?);
    probes.push(p.cancel(opts).await?);
    let tasks = task_offer(&p.server);
    probes.push(p.task(&tasks, opts).await?);
    probes.push(p.input_required(opts).await?);
    p.transport.close().await;
    let transport = p.transport.short_name();
    Ok(ProbeReport {
        target: connector.target().describe(),
        transport,
        server: (*server).clone(),
        tasks,
        probes,
    })
}

struct Prober {
    transport: AnyTransport,
    server: Arc<ServerInfo>,
    wait: Duration,
}

fn id(s: &str) -> Id {
    Id::Str(s.into())
}

/// The body of one request: `op` with `id`.
fn single_body(op: &Operation, id: &Id) -> Bytes {
    let mut body = Vec::new();
    op.stamp(&mut body, id);
    Bytes::from(body)
}

fn result(
    probe: &'static str,
    variant: Option<&'static str>,
    verdict: &'static str,
    detail: Option<String>,
    evidence: Evidence,
) -> ProbeResult {
    ProbeResult {
        probe,
        variant,
        verdict,
        detail,
        evidence,
    }
}

impl Prober {
    /// A cheap call for the batch probes: `echo` if the server has it, else the tool with
    /// the fewest required arguments, else `tools/list`.
    fn sample_call(&self) -> Result<Operation, McpError> {
        let tool = self
            .server
            .tool("echo")
            .or_else(|| self.server.tools.iter().min_by_key(|t| t.required.len()));
        match tool {
            Some(t) => self.tool_call(&t.name, &arguments_for(&t.input_schema)),
            None => self.server.operation("tools/list", None),
        }
    }

    /// `tools/call` of `tool` with `arguments`, for the server's revision.
    fn tool_call(&self, tool: &str, arguments: &Value) -> Result<Operation, McpError> {
        self.server.operation(
            "tools/call",
            Some(&json!({"name": tool, "arguments": arguments})),
        )
    }

    fn is_http(&self) -> bool {
        matches!(self.transport, AnyTransport::Http(_))
    }

    /// Sends `body` and collects what comes back: an HTTP answer read to its end (within
    /// four times `wait`), or stdio lines until every id in `expect` was answered (plus a short
    /// grace) or `wait` passed.
    async fn exchange(&mut self, body: Bytes, headers: &McpHeaders, expect: &[Id]) -> Observed {
        let wait = self.answer_wait();
        self.exchange_within(body, headers, expect, wait).await
    }

    /// How long [`Prober::exchange`] waits: four times `wait` for an HTTP answer to end,
    /// `wait` for stdio lines.
    fn answer_wait(&self) -> Duration {
        if self.is_http() {
            self.wait * 4
        } else {
            self.wait
        }
    }

    /// [`Prober::exchange`] bounded by `wait` on either transport.
    async fn exchange_within(
        &mut self,
        body: Bytes,
        headers: &McpHeaders,
        expect: &[Id],
        wait: Duration,
    ) -> Observed {
        match &mut self.transport {
            AnyTransport::Http(h) => match h.post_once(body, headers, wait).await {
                Ok(reply) => {
                    let mut o = Observed {
                        status: vec![reply.status],
                        content_type: reply.content_type.into_iter().collect(),
                        unreadable: reply.unreadable.len(),
                        failure: reply.broken.map(|e| e.to_string()),
                        ..Observed::default()
                    };
                    for (_, m) in &reply.messages {
                        o.add_text(m);
                    }
                    o
                }
                Err(e) => Observed {
                    failure: Some(e.to_string()),
                    ..Observed::default()
                },
            },
            AnyTransport::Stdio(s) => {
                s.write_raw(&body);
                s.write_raw(b"\n");
                collect_messages(&mut **s, expect, wait).await
            }
            t @ (AnyTransport::LegacySse(_) | AnyTransport::Fleet(_)) => {
                t.send(Outgoing::single(body, None, headers.clone()));
                collect_messages(t, expect, wait).await
            }
        }
    }

    async fn batch(&mut self, call: &Operation) -> Result<ProbeResult, McpError> {
        let (a, b) = (id("probe-batch-1"), id("probe-batch-2"));
        let mut body = BatchWriter::default();
        call.stamp(body.member(), &a);
        call.stamp(body.member(), &b);
        body.member()
            .extend_from_slice(&cancel_notification(&id("probe-none")));
        let o = self
            .exchange(
                Bytes::from(body.into_bytes()),
                &McpHeaders::default(),
                &[a.clone(), b.clone()],
            )
            .await;
        let (verdict, detail) = verdict_batch(&o, &a, &b);
        Ok(result("batch", None, verdict, detail, o.evidence(None)))
    }

    async fn notification_only_batch(&mut self) -> ProbeResult {
        let mut body = BatchWriter::default();
        body.member()
            .extend_from_slice(&cancel_notification(&id("probe-none")));
        let o = self
            .exchange(Bytes::from(body.into_bytes()), &McpHeaders::default(), &[])
            .await;
        let v = verdict_notification_only(&o);
        result("notification_only_batch", None, v, None, o.evidence(None))
    }

    async fn empty_batch(&mut self) -> ProbeResult {
        let o = self
            .exchange(Bytes::from_static(b"[]"), &McpHeaders::default(), &[])
            .await;
        let v = verdict_empty_batch(&o);
        result("empty_batch", None, v, None, o.evidence(None))
    }

    async fn id_collision_batch(&mut self, call: &Operation) -> Result<ProbeResult, McpError> {
        let same = id("probe-collide-batch");
        let mut body = BatchWriter::default();
        call.stamp(body.member(), &same);
        call.stamp(body.member(), &same);
        let o = self
            .exchange(
                Bytes::from(body.into_bytes()),
                &McpHeaders::default(),
                &[same.clone(), same.clone()],
            )
            .await;
        let v = verdict_id_collision(&o, &same);
        let note = (v == "rejected").then(|| refusal_note(&o));
        Ok(result(
            "id_collision",
            Some("batch"),
            v,
            note,
            o.evidence(None),
        ))
    }

    async fn id_collision_concurrent(&mut self, call: &Operation) -> Result<ProbeResult, McpError> {
        let same = id("probe-collide-concurrent");
        let body = single_body(call, &same);
        let wait = self.wait;
        let o = match &mut self.transport {
            AnyTransport::Http(h) => {
                // Both are out before either answer is awaited.
                let x = h.post(body.clone(), call.headers(), wait * 4);
                let y = h.post(body, call.headers(), wait * 4);
                let (x, y) = (h.reply(x).await, h.reply(y).await);
                let mut o = Observed::default();
                for r in [x, y] {
                    let mut one = Observed::default();
                    match r {
                        Ok(reply) => {
                            one.status.push(reply.status);
                            one.content_type.extend(reply.content_type);
                            for (_, m) in &reply.messages {
                                one.add_text(m);
                            }
                        }
                        Err(e) => one.failure = Some(e.to_string()),
                    }
                    o = o.merge(one);
                }
                o
            }
            AnyTransport::Stdio(s) => {
                for _ in 0..2 {
                    s.write_raw(&body);
                    s.write_raw(b"\n");
                }
                collect_messages(&mut **s, &[same.clone(), same.clone()], wait).await
            }
            t @ (AnyTransport::LegacySse(_) | AnyTransport::Fleet(_)) => {
                for _ in 0..2 {
                    t.send(Outgoing::single(body.clone(), None, McpHeaders::default()));
                }
                collect_messages(t, &[same.clone(), same.clone()], wait).await
            }
        };
        let v = verdict_id_collision(&o, &same);
        let note = (v == "rejected").then(|| refusal_note(&o));
        Ok(result(
            "id_collision",
            Some("concurrent"),
            v,
            note,
            o.evidence(None),
        ))
    }

    async fn null_id(&mut self) -> ProbeResult {
        let op = self.server.operation("tools/list", None);
        let mut body = Vec::new();
        let headers = match &op {
            Ok(op) => {
                // `stamp` writes an id; a null one is spliced in by hand.
                op.stamp(&mut body, &id("x"));
                let text =
                    String::from_utf8_lossy(&body).replacen(r#""id":"x""#, r#""id":null"#, 1);
                body = text.into_bytes();
                op.headers().clone()
            }
            Err(_) => McpHeaders::default(),
        };
        let o = self.exchange(Bytes::from(body), &headers, &[]).await;
        let v = verdict_null_id(&o);
        result("null_id_request", None, v, None, o.evidence(None))
    }

    async fn malformed(&mut self) -> ProbeResult {
        let o = self
            .exchange(
                Bytes::from_static(br#"{"jsonrpc":"2.0","id":"probe-malformed","method":"#),
                &McpHeaders::default(),
                &[],
            )
            .await;
        let v = verdict_malformed(&o);
        result("malformed_json", None, v, None, o.evidence(None))
    }

    async fn unknown_method(&mut self) -> Result<ProbeResult, McpError> {
        let the_id = id("probe-unknown-method");
        let op = self.server.operation("mcpload/no-such-method", None)?;
        let o = self
            .exchange(
                single_body(&op, &the_id),
                op.headers(),
                std::slice::from_ref(&the_id),
            )
            .await;
        let want_404 = self.is_http() && self.server.revision.is_modern();
        let v = verdict_unknown_method(&o, &the_id, want_404);
        Ok(result("unknown_method", None, v, None, o.evidence(None)))
    }

    async fn cancel(&mut self, opts: &ProbeOptions) -> Result<ProbeResult, McpError> {
        let slow = opts
            .slow_call
            .clone()
            .or_else(|| slow_call(&self.server.tools));
        let Some((tool, args)) = slow else {
            return Ok(result(
                "cancel",
                None,
                "skipped",
                Some("no slow tool found (name one with --slow-tool)".into()),
                Evidence::default(),
            ));
        };
        let the_id = id("probe-cancel");
        let op = self.tool_call(&tool, &args)?;
        let body = single_body(&op, &the_id);
        let listen = SLOW_CALL + self.wait;
        let modern = self.server.revision.is_modern();
        let (o, note) = match &mut self.transport {
            AnyTransport::Http(h) if modern => {
                // Closing the request's stream is the cancel.
                let mut o = Observed::default();
                let note = match tokio::time::timeout(
                    CANCEL_AFTER,
                    h.post_once(body, op.headers(), listen),
                )
                .await
                {
                    Ok(Ok(reply)) => {
                        o.status.push(reply.status);
                        for (_, m) in &reply.messages {
                            o.add_text(m);
                        }
                        "answered before the cancel".to_string()
                    }
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("stream closed by mcpload after {CANCEL_AFTER:?}"),
                };
                (o, Some(note))
            }
            AnyTransport::Http(h) => {
                let cancel_at = tokio::time::Instant::now() + CANCEL_AFTER;
                let call = h.post(body, op.headers(), listen);
                let early = tokio::time::timeout_at(cancel_at, h.reply(call)).await;
                tokio::time::sleep_until(cancel_at).await;
                let cancel = cancel_notification(&the_id);
                let sent = h.post_once(cancel, &McpHeaders::default(), listen).await;
                let slow = match early {
                    Ok(answered) => answered,
                    Err(_) => h.reply(call).await,
                };
                let mut o = Observed::default();
                let mut note = match sent {
                    Ok(r) => format!("notifications/cancelled answered HTTP {}", r.status),
                    Err(e) => format!("notifications/cancelled failed: {e}"),
                };
                match slow {
                    Ok(reply) => {
                        o.status.push(reply.status);
                        o.content_type.extend(reply.content_type);
                        for (_, m) in &reply.messages {
                            o.add_text(m);
                        }
                    }
                    Err(e) => note.push_str(&format!("; the call's stream: {e}")),
                }
                (o, Some(note))
            }
            AnyTransport::Stdio(s) => {
                s.write_raw(&body);
                s.write_raw(b"\n");
                let mut o = collect_messages(&mut **s, &[], CANCEL_AFTER).await;
                s.write_raw(&cancel_notification(&the_id));
                s.write_raw(b"\n");
                let expect = std::slice::from_ref(&the_id);
                o = o.merge(collect_messages(&mut **s, expect, listen).await);
                (o, Some("notifications/cancelled sent".to_string()))
            }
            t @ (AnyTransport::LegacySse(_) | AnyTransport::Fleet(_)) => {
                let none = McpHeaders::default();
                t.send(Outgoing::single(body, None, none.clone()));
                let mut o = collect_messages(t, &[], CANCEL_AFTER).await;
                t.send(Outgoing::single(cancel_notification(&the_id), None, none));
                let expect = std::slice::from_ref(&the_id);
                o = o.merge(collect_messages(t, expect, listen).await);
                (o, Some("notifications/cancelled sent".to_string()))
            }
        };
        let verdict = if o.answered(&the_id) > 0 {
            "answered_anyway"
        } else {
            "stopped"
        };
        let call = format!(
            "{tool} {}",
            serde_json::to_string(&args).unwrap_or_default()
        );
        let note = note.map_or(call.clone(), |n| format!("{call}; {n}"));
        Ok(result(
            "cancel",
            None,
            verdict,
            None,
            o.evidence(Some(note)),
        ))
    }
}

/// Reads the messages of a transport whose answers come apart from their requests (stdio
/// output, the legacy HTTP+SSE stream) until every id of `expect` has an answer (then 100 ms
/// more, to catch a second answer) or `wait` passes; a refused POST's status is kept.
async fn collect_messages<T: Transport>(s: &mut T, expect: &[Id], wait: Duration) -> Observed {
    let mut o = Observed::default();
    let mut deadline = Instant::now() + wait;
    let mut grace_started = false;
    loop {
        match tokio::time::timeout_at(deadline, s.next_event()).await {
            Err(_) => return o,
            Ok(Event::Message { bytes, .. }) => o.add_text(&bytes),
            Ok(Event::Unreadable { .. }) => o.unreadable += 1,
            Ok(Event::Refused { status, .. }) => o.status.push(status),
            Ok(Event::Down { error }) => {
                o.failure = Some(error.to_string());
                return o;
            }
            Ok(_) => {}
        }
        let done = !expect.is_empty() && expect.iter().all(|id| o.answered(id) > 0);
        if done && !grace_started {
            grace_started = true;
            deadline = deadline.min(Instant::now() + Duration::from_millis(100));
        }
    }
}

/// A call that takes about [`SLOW_CALL`]: a tool whose name says it waits (sleep, slow,
/// delay, long) with a duration argument in milliseconds or seconds.
pub fn slow_call(tools: &[ToolInfo]) -> Option<(String, Value)> {
    tools.iter().find_map(|t| {
        let lname = t.name.to_ascii_lowercase();
        if !["sleep", "slow", "delay", "long"]
            .iter()
            .any(|w| lname.contains(w))
        {
            return None;
        }
        let (args, timed) = timed_arguments(t, SLOW_CALL);
        timed.then(|| (t.name.clone(), args))
    })
}

/// `t`'s arguments made from its schema, every numeric duration argument set to `d`: one
/// named in milliseconds (`ms`, `*_ms`, `*millis*`) or in seconds (`duration`, `seconds`,
/// `secs`, `delay`; fractional when `d` is no whole number of seconds and the type allows).
/// Also whether there was such an argument.
fn timed_arguments(t: &ToolInfo, d: Duration) -> (Value, bool) {
    let mut args = match arguments_for(&t.input_schema) {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let mut timed = false;
    let props = t
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten();
    for (name, schema) in props {
        let ty = schema.get("type").and_then(Value::as_str);
        if !matches!(ty, Some("integer" | "number")) {
            continue;
        }
        let n = name.to_ascii_lowercase();
        let value = if n == "ms" || n.ends_with("_ms") || n.contains("millis") {
            json!(d.as_millis() as u64)
        } else if ["duration", "seconds", "secs", "delay"].contains(&n.as_str()) {
            if d.subsec_nanos() == 0 || ty == Some("integer") {
                json!(d.as_secs_f64().ceil() as u64)
            } else {
                json!(d.as_secs_f64())
            }
        } else {
            continue;
        };
        args.insert(name.clone(), value);
        timed = true;
    }
    (Value::Object(args), timed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(status: &[u16], texts: &[&str]) -> Observed {
        let mut o = Observed {
            status: status.to_vec(),
            ..Observed::default()
        };
        for t in texts {
            o.add_text(t.as_bytes());
        }
        o
    }

    const A: &str = r#"{"jsonrpc":"2.0","id":"a","result":{}}"#;
    const B: &str = r#"{"jsonrpc":"2.0","id":"b","result":{}}"#;

    #[test]
    fn batch_verdicts() {
        let (a, b) = (id("a"), id("b"));
        assert_eq!(
            verdict_batch(&obs(&[200], &[A, B]), &a, &b).1.as_deref(),
            Some("in_order")
        );
        let v = verdict_batch(&obs(&[200], &[&format!("[{B},{A}]")]), &a, &b);
        assert_eq!(v, ("answered", Some("reordered".into())));
        let refused = obs(
            &[400],
            &[r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":""}}"#],
        );
        assert_eq!(
            verdict_batch(&refused, &a, &b),
            ("rejected", Some("HTTP 400, error -32600".into()))
        );
        assert_eq!(verdict_batch(&obs(&[415], &[]), &a, &b).0, "rejected");
        assert_eq!(verdict_batch(&obs(&[200], &[A]), &a, &b).0, "broken");
        assert_eq!(verdict_batch(&obs(&[200], &[A, A]), &a, &b).0, "broken");
        assert_eq!(
            verdict_batch(&obs(&[], &[]), &a, &b),
            ("broken", Some("no answer at all".into()))
        );
    }

    #[test]
    fn collision_null_id_malformed_and_unknown_method_verdicts() {
        let x = id("a");
        assert_eq!(
            verdict_id_collision(&obs(&[200], &[A, A]), &x),
            "both_answered"
        );
        assert_eq!(verdict_id_collision(&obs(&[200], &[A]), &x), "one_lost");
        assert_eq!(verdict_id_collision(&obs(&[400], &[]), &x), "rejected");
        let null_err = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":""}}"#;
        assert_eq!(
            verdict_null_id(&obs(&[400], &[null_err])),
            "rejected_with_error"
        );
        assert_eq!(verdict_null_id(&obs(&[202], &[])), "silent");
        assert_eq!(
            verdict_null_id(&obs(&[], &[r#"{"jsonrpc":"2.0","id":null,"result":{}}"#])),
            "answered"
        );
        assert_eq!(
            verdict_malformed(&obs(&[400], &[null_err])),
            "parse_error_with_null_id"
        );
        assert_eq!(verdict_malformed(&obs(&[], &[])), "silent");
        assert_eq!(verdict_malformed(&obs(&[400], &[])), "other");
        let nf = r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":""}}"#;
        assert_eq!(
            verdict_unknown_method(&obs(&[404], &[nf]), &x, true),
            "method_not_found"
        );
        assert_eq!(
            verdict_unknown_method(&obs(&[200], &[nf]), &x, true),
            "wrong_status"
        );
        assert_eq!(
            verdict_unknown_method(&obs(&[200], &[nf]), &x, false),
            "method_not_found"
        );
        assert_eq!(verdict_unknown_method(&obs(&[], &[]), &x, false), "silent");
    }

    #[test]
    fn empty_and_notification_only_batch_verdicts() {
        let inv = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":""}}"#;
        assert_eq!(verdict_empty_batch(&obs(&[200], &[inv])), "invalid_request");
        assert_eq!(verdict_empty_batch(&obs(&[202], &[])), "no_answer");
        let other = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":""}}"#;
        assert_eq!(verdict_empty_batch(&obs(&[400], &[other])), "rejected");
        assert_eq!(verdict_notification_only(&obs(&[202], &[])), "no_answer");
        assert_eq!(
            verdict_notification_only(&obs(&[400], &[other])),
            "rejected"
        );
        assert_eq!(verdict_notification_only(&obs(&[], &[other])), "answered");
        assert_eq!(verdict_notification_only(&obs(&[400], &[])), "rejected");
    }

    fn tool(name: &str, schema: Value) -> ToolInfo {
        ToolInfo::new(name.into(), schema, crate::client::Revision::V2025_11_25)
    }

    #[test]
    fn a_slow_call_is_found_by_name_and_duration_argument() {
        let tools = vec![
            tool(
                "echo",
                json!({"properties": {"message": {"type": "string"}}, "required": ["message"]}),
            ),
            tool(
                "sleep",
                json!({"properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
            ),
            tool(
                "trigger-long-running-operation",
                json!({"properties": {"duration": {"type": "number", "default": 10}, "steps": {"type": "number"}}}),
            ),
        ];
        assert_eq!(
            slow_call(&tools),
            Some(("sleep".into(), json!({"ms": 2000})))
        );
        assert_eq!(
            slow_call(&tools[2..]),
            Some((
                "trigger-long-running-operation".into(),
                json!({"duration": 2})
            ))
        );
        assert_eq!(slow_call(&tools[..1]), None);
    }
}
