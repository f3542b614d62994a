//! The `task` and `input_required` probes. What the server declares of tasks ([`TaskOffer`]:
//! 2025-11-25 `capabilities.tasks` and each tool's `execution.taskSupport`, or the 2026-07-28
//! `io.modelcontextprotocol/tasks` extension); one real task round trip ([`TaskTrip`]: the
//! call made a task, `tasks/get` polled at the server's `pollInterval` to a terminal status
//! within a bounded wait, polled once more to see it stay, the result taken as the revision
//! says, a task still working at the end cancelled); one call answered `input_required`
//! (2026-07-28, [`InputTrip`]) without and with the client capabilities declared, then sent
//! again with canned answers. The verdicts are pure functions of those records.

use super::{
    Evidence, Observed, ProbeOptions, ProbeResult, Prober, id, result, single_body, timed_arguments,
};
use crate::client::{McpError, ServerInfo, TaskSupport, ToolInfo};
use crate::jsonrpc::{Id, codes};
use crate::load::flow::{
    CallAnswer, CannedInput, DEFAULT_POLL_INTERVAL, FlowRules, Inline, SideOps, Status, TaskMethod,
    TaskView, call_meta, read_call, read_task, render_retry, result_agrees,
};
use crate::load::schema_args::arguments_for;
use crate::metrics::AskedKind;
use crate::profile::{ElicitAction, Elicitation, InputAnswers};
use crate::protocol::codes::MISSING_CLIENT_CAPABILITY;
use crate::protocol::{Revision, TASKS_EXTENSION};
use crate::transport::McpHeaders;
use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::slice;
use std::time::Duration;
use tokio::time::Instant;

/// How long the work of a task the probe starts takes, where the tool has a duration argument.
const TASK_WORK: Duration = Duration::from_millis(500);
/// The shortest pause between polls, whatever `pollInterval` says.
const MIN_POLL: Duration = Duration::from_millis(10);
/// The most `tasks/get` one round trip sends.
const MAX_POLLS: u32 = 500;
/// Polls failing in a row after which the round trip gives up on the task.
const MAX_FAILING_POLLS: u32 = 3;

/// What the server declares of tasks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskOffer {
    /// Where: `capabilities.tasks` (2025-11-25), `extension` (2026-07-28's
    /// `io.modelcontextprotocol/tasks` in `capabilities.extensions`), or `none`.
    pub declared: &'static str,
    /// 2025-11-25: `tasks.list` is declared (`tasks/list`).
    pub list: bool,
    /// 2025-11-25: `tasks.cancel` is declared (`tasks/cancel`).
    pub cancel: bool,
    /// 2025-11-25: the requests that may be task-augmented (`tasks.requests`), by method.
    pub requests: Vec<String>,
    /// The tools whose `execution.taskSupport` is `optional` or `required` (2025-11-25;
    /// 2026-07-28 has no per-tool flag: the server decides per call).
    pub tools: Vec<ToolTasks>,
}

/// A tool that may run as a task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolTasks {
    pub name: String,
    pub task_support: TaskSupport,
}

impl TaskOffer {
    pub fn is_declared(&self) -> bool {
        self.declared != "none"
    }

    /// Whether a `tools/call` may be made a task.
    pub fn calls_as_tasks(&self) -> bool {
        self.declared == "extension" || self.requests.iter().any(|r| r == "tools/call")
    }
}

/// Reads what the server declared of tasks for the agreed revision (none before 2025-11-25).
pub fn task_offer(server: &ServerInfo) -> TaskOffer {
    let caps = &server.capabilities;
    let mut offer = TaskOffer {
        declared: "none",
        list: false,
        cancel: false,
        requests: Vec::new(),
        tools: server
            .tools
            .iter()
            .filter(|t| t.task_support != TaskSupport::Forbidden)
            .map(|t| ToolTasks {
                name: t.name.clone(),
                task_support: t.task_support,
            })
            .collect(),
    };
    if server.revision.is_modern() {
        let ext = caps
            .get("extensions")
            .and_then(|e| e.get(TASKS_EXTENSION))
            .is_some_and(Value::is_object);
        if ext {
            offer.declared = "extension";
        }
        return offer;
    }
    let tasks = caps.get("tasks").filter(|t| t.is_object());
    let Some(tasks) = tasks.filter(|_| server.revision >= Revision::V2025_11_25) else {
        return offer;
    };
    offer.declared = "capabilities.tasks";
    offer.list = tasks.get("list").is_some_and(Value::is_object);
    offer.cancel = tasks.get("cancel").is_some_and(Value::is_object);
    let groups = tasks.get("requests").and_then(Value::as_object);
    for (group, verbs) in groups.into_iter().flatten() {
        for (verb, v) in verbs.as_object().into_iter().flatten() {
            if v.is_object() {
                offer.requests.push(format!("{group}/{verb}"));
            }
        }
    }
    offer
}

/// One request's answer, in the terms the probes judge.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// A final result; `is_error`: a tool error (`isError: true`).
    Complete { is_error: bool },
    /// A task, with its status.
    Task { status: String },
    /// 2026-07-28 `resultType: "input_required"`: the kinds asked for (`elicitation`,
    /// `sampling`, `roots`, `other`), and whether it carries a `requestState`.
    InputRequired {
        kinds: Vec<String>,
        request_state: bool,
    },
    /// An error response; `required`: the capabilities a -32021 names.
    Error {
        code: i64,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        required: Vec<String>,
    },
    /// No response to the request.
    NoAnswer { note: String },
}

impl Answer {
    /// The answer `o` holds for the request `id` (`modern`: read as 2026-07-28 results).
    pub fn of(o: &Observed, id: &Id, modern: bool) -> Answer {
        let Some(r) = o.response(id) else {
            let note = o.failure.clone().unwrap_or_else(|| super::refusal_note(o));
            return Answer::NoAnswer { note };
        };
        if let Some(code) = r.error_code {
            let required = r
                .error_data
                .as_ref()
                .and_then(|d| d.get("requiredCapabilities"))
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            return Answer::Error { code, required };
        }
        Answer::of_result(r.result.as_ref().unwrap_or(&Value::Null), modern)
    }

    /// What a `tools/call` result is.
    fn of_result(result: &Value, modern: bool) -> Answer {
        let Some(raw) = raw(result) else {
            return Answer::Complete { is_error: false };
        };
        match read_call(&raw, modern) {
            CallAnswer::Done { is_error } => Answer::Complete { is_error },
            CallAnswer::Input { requests, state } => Answer::InputRequired {
                kinds: requests.values().map(kind_of).collect(),
                request_state: state.is_some(),
            },
            CallAnswer::Task(_) => Answer::Task {
                status: status_of(result),
            },
        }
    }

    /// In words, for the table.
    fn describe(&self) -> String {
        match self {
            Answer::Complete { is_error: false } => "complete".into(),
            Answer::Complete { is_error: true } => "tool error".into(),
            Answer::Task { status } => format!("task {status}"),
            Answer::InputRequired {
                kinds,
                request_state,
            } => {
                let mut what = kinds.join("+");
                if *request_state {
                    what.push_str(if kinds.is_empty() { "" } else { ", " });
                    what.push_str("requestState");
                }
                format!("input_required ({what})")
            }
            Answer::Error { code, required } if required.is_empty() => format!("error {code}"),
            Answer::Error { code, required } => {
                format!("error {code} (needs {})", required.join(", "))
            }
            Answer::NoAnswer { note } => format!("no answer ({note})"),
        }
    }
}

/// The kind an input request asks for, by its method (`other` for none of the three).
fn kind_of(request: &Value) -> String {
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    AskedKind::of_method(method).name().to_owned()
}

/// A task's status as written: 2025-11-25's creation nests it in `task`.
fn status_of(v: &Value) -> String {
    v.pointer("/task/status")
        .or_else(|| v.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn raw(v: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(v).ok()
}

fn millis(d: Option<Duration>) -> Option<u64> {
    d.map(|d| d.as_millis() as u64)
}

/// One task round trip as observed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskTrip {
    pub tool: String,
    pub arguments: Value,
    /// The answer to the call made a task.
    pub created: Answer,
    pub task_id: Option<String>,
    /// Each status seen, in order: the creation's, then each poll's; the poll after the
    /// first terminal status is there to see it stay.
    pub statuses: Vec<String>,
    /// `tasks/get` sent.
    pub polls: u32,
    /// Polls answered with an error, or with a result that is no task, or not answered.
    pub poll_errors: Vec<String>,
    /// A poll was answered -32602 (unknown task) before the task's `ttl` passed.
    pub forgotten: bool,
    /// A poll was answered -32602 after the task's `ttl` passed.
    pub expired: bool,
    /// The last `pollInterval` the server advised.
    pub poll_interval_ms: Option<u64>,
    pub ttl_ms: Option<u64>,
    /// The task's result: 2025-11-25 the answer to `tasks/result`, 2026-07-28 what the
    /// terminal `tasks/get` carried inline.
    pub result: Option<Answer>,
    /// No terminal status within the wait.
    pub unfinished: bool,
    /// The answer to `tasks/cancel`, sent for a task given up before a terminal status.
    pub cancel: Option<Answer>,
    pub elapsed_ms: u64,
}

impl TaskTrip {
    fn new(tool: String, arguments: Value, created: Answer) -> TaskTrip {
        TaskTrip {
            tool,
            arguments,
            created,
            task_id: None,
            statuses: Vec::new(),
            polls: 0,
            poll_errors: Vec::new(),
            forgotten: false,
            expired: false,
            poll_interval_ms: None,
            ttl_ms: None,
            result: None,
            unfinished: false,
            cancel: None,
            elapsed_ms: 0,
        }
    }

    /// In words, for the table.
    pub(super) fn describe(&self) -> String {
        let mut parts = vec![format!("tool {}", self.tool)];
        match &self.task_id {
            Some(t) => parts.push(format!("task {t}")),
            None => parts.push(format!("call: {}", self.created.describe())),
        }
        if !self.statuses.is_empty() {
            parts.push(runs(&self.statuses));
        }
        if self.polls > 0 {
            let every = self
                .poll_interval_ms
                .map_or_else(String::new, |p| format!(" (pollInterval {p} ms)"));
            parts.push(format!("{} polls{every}", self.polls));
        }
        if let Some(r) = &self.result {
            parts.push(format!("result: {}", r.describe()));
        }
        if let Some(c) = &self.cancel {
            parts.push(format!("tasks/cancel: {}", c.describe()));
        }
        parts.push(format!("{} ms", self.elapsed_ms));
        parts.join("; ")
    }
}

/// Statuses with each run of one written once, counted: `working x4 > completed x2`.
fn runs(statuses: &[String]) -> String {
    let mut out: Vec<(&str, usize)> = Vec::new();
    for s in statuses {
        match out.last_mut() {
            Some((last, n)) if *last == s.as_str() => *n += 1,
            _ => out.push((s, 1)),
        }
    }
    let words: Vec<String> = out
        .iter()
        .map(|(s, n)| {
            if *n == 1 {
                s.to_string()
            } else {
                format!("{s} x{n}")
            }
        })
        .collect();
    words.join(" > ")
}

/// `task`: `supported` (a task created, polled to a terminal status that stays, its result
/// agreeing with it; the detail is that status), `unsupported` (no tasks declared, or not
/// for `tools/call`), `no_task` (2026-07-28: the server answered the call itself, as it may),
/// `unfinished` (not terminal within the wait, or expired), `broken` (the detail says what),
/// `skipped` (no tool to try).
pub fn verdict_task(
    offer: &TaskOffer,
    trip: Option<&TaskTrip>,
    modern: bool,
) -> (&'static str, Option<String>) {
    let Some(t) = trip else {
        if !offer.is_declared() && !offer.tools.is_empty() {
            let names: Vec<&str> = offer.tools.iter().map(|t| t.name.as_str()).collect();
            let why = format!(
                "{} declare taskSupport, but the server declares no tasks",
                names.join(", ")
            );
            return ("broken", Some(why));
        }
        if !offer.is_declared() {
            return ("unsupported", None);
        }
        if !offer.calls_as_tasks() {
            return (
                "unsupported",
                Some("tools/call is not task-augmentable".into()),
            );
        }
        let why = "no tool to run as a task (name one with --task-tool)";
        return ("skipped", Some(why.into()));
    };
    let broken = |why: String| ("broken", Some(why));
    match &t.created {
        Answer::Task { .. } => {}
        Answer::Complete { .. } if modern => {
            return ("no_task", Some("the call was answered at once".into()));
        }
        Answer::InputRequired { .. } => {
            return ("no_task", Some("the call asked for input".into()));
        }
        Answer::Complete { .. } => {
            return broken("a task-augmented call was answered without a task".into());
        }
        Answer::Error { code, .. } => return broken(format!("the call was answered error {code}")),
        Answer::NoAnswer { note } => return broken(format!("no answer to the call ({note})")),
    }
    if let Some(s) = t
        .statuses
        .iter()
        .find(|s| Status::parse(s) == Status::Other)
    {
        return broken(format!("unknown status {s:?}"));
    }
    if t.forgotten {
        return broken("tasks/get did not know the task before its ttl".into());
    }
    let first_terminal = t
        .statuses
        .iter()
        .position(|s| Status::parse(s).is_terminal());
    if let Some(i) = first_terminal
        && let Some(other) = t.statuses[i + 1..].iter().find(|s| **s != t.statuses[i])
    {
        return broken(format!("status {} went to {other}", t.statuses[i]));
    }
    if !t.poll_errors.is_empty() {
        return broken(format!("polls answered {}", t.poll_errors.join(", ")));
    }
    if t.expired {
        return ("unfinished", Some("unknown after its ttl".into()));
    }
    let Some(i) = first_terminal else {
        let last = t.statuses.last().map_or("", String::as_str);
        let why = format!("still {last} after {} polls", t.polls);
        return ("unfinished", Some(why));
    };
    let terminal = &t.statuses[i];
    let status = Status::parse(terminal);
    if status == Status::Cancelled {
        return ("supported", Some(terminal.clone()));
    }
    let inline = match &t.result {
        Some(Answer::Complete { is_error }) => Inline::Result {
            is_error: *is_error,
        },
        Some(Answer::Error { .. }) => Inline::Error,
        Some(other) => return broken(format!("{terminal}, then {}", other.describe())),
        None => return broken(format!("{terminal} without a result")),
    };
    if !result_agrees(status, inline, modern) {
        let what = t.result.as_ref().map(Answer::describe).unwrap_or_default();
        return broken(format!("{terminal} with a result that disagrees ({what})"));
    }
    ("supported", Some(terminal.clone()))
}

/// The calls of the `input_required` probe (2026-07-28).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputTrip {
    pub tool: String,
    pub arguments: Value,
    /// The call declaring no client capabilities.
    pub undeclared: Answer,
    /// The call declaring elicitation, sampling and roots.
    pub declared: Answer,
    /// The declared call sent again with an answer to each input request (an elicitation
    /// declined, a sampling text, no roots), after an `input_required`.
    pub retry: Option<Answer>,
}

impl InputTrip {
    /// In words, for the table.
    pub(super) fn describe(&self) -> String {
        let mut parts = vec![
            format!("tool {}", self.tool),
            format!("without capabilities: {}", self.undeclared.describe()),
            format!("with: {}", self.declared.describe()),
        ];
        if let Some(r) = &self.retry {
            parts.push(format!("retry: {}", r.describe()));
        }
        parts.join("; ")
    }
}

/// `input_required`: `supported` (answered `input_required`, and the retry with the answers
/// was taken up; the detail says whether the client capabilities are needed), `not_asked`
/// (answered at once), `refused` (the call declaring every input kind was refused),
/// `broken` (asked without the capability declared, an `input_required` with nothing in it,
/// a kind no client can answer, the retry refused), `skipped` (not in the revision, or no
/// tool to try).
pub fn verdict_input(
    revision: Revision,
    trip: Option<&InputTrip>,
) -> (&'static str, Option<String>) {
    if !revision.is_modern() {
        return ("skipped", Some(format!("not in {revision}")));
    }
    let Some(t) = trip else {
        let why = "no tool that asks for input (name one with --input-tool)";
        return ("skipped", Some(why.into()));
    };
    let broken = |why: String| ("broken", Some(why));
    let needs = match &t.undeclared {
        Answer::Error { code, required } if *code == MISSING_CLIENT_CAPABILITY => {
            if required.is_empty() {
                "needs client capabilities".to_owned()
            } else {
                format!("needs {}", required.join(", "))
            }
        }
        Answer::InputRequired { kinds, .. } if !kinds.is_empty() => {
            let why = format!(
                "asked for {} without the capability declared",
                kinds.join(", ")
            );
            return broken(why);
        }
        Answer::Error { code, .. } => format!("without capabilities: error {code}"),
        Answer::NoAnswer { .. } => "without capabilities: no answer".to_owned(),
        _ => "capabilities not needed".to_owned(),
    };
    match &t.declared {
        Answer::InputRequired {
            kinds,
            request_state,
        } => {
            if kinds.is_empty() && !request_state {
                return broken("input_required with neither inputRequests nor requestState".into());
            }
            if kinds.iter().any(|k| k == "other") {
                return broken("asked for input that is no elicitation, sampling or roots".into());
            }
            match &t.retry {
                Some(Answer::Error { code, .. }) => broken(format!(
                    "the retry with the answers was answered error {code}"
                )),
                Some(Answer::NoAnswer { note }) => {
                    broken(format!("no answer to the retry ({note})"))
                }
                Some(_) => ("supported", Some(needs)),
                None => broken("not sent again".into()),
            }
        }
        Answer::Complete { .. } | Answer::Task { .. } => (
            "not_asked",
            Some("answered without asking for input".into()),
        ),
        Answer::Error { .. } => ("refused", Some(t.declared.describe())),
        Answer::NoAnswer { note } => broken(format!("no answer ({note})")),
    }
}

/// The tool the `task` probe runs as a task: 2025-11-25 one whose `taskSupport` is
/// `required` (else `optional`), with the fewest required arguments; 2026-07-28 one whose
/// name says task. Its duration argument, if any, is [`TASK_WORK`].
pub(super) fn task_call(tools: &[ToolInfo], modern: bool) -> Option<(String, Value)> {
    let callable = tools.iter().filter(|t| t.invalid.is_none());
    let tool = if modern {
        callable
            .filter(|t| t.name.to_ascii_lowercase().contains("task"))
            .min_by_key(|t| t.required.len())
    } else {
        callable
            .filter(|t| t.task_support != TaskSupport::Forbidden)
            .min_by_key(|t| (t.task_support != TaskSupport::Required, t.required.len()))
    }?;
    Some((tool.name.clone(), timed_arguments(tool, TASK_WORK).0))
}

/// The tool the `input_required` probe calls: one whose name says input or elicitation.
pub(super) fn input_call(tools: &[ToolInfo]) -> Option<(String, Value)> {
    tools
        .iter()
        .filter(|t| t.invalid.is_none())
        .find(|t| {
            let n = t.name.to_ascii_lowercase();
            n.contains("input") || n.contains("elicit")
        })
        .map(|t| (t.name.clone(), arguments_for(&t.input_schema)))
}

/// The answers the `input_required` probe gives: an elicitation declined (valid whatever
/// the form), a sampling text, no roots.
fn probe_answers() -> CannedInput {
    CannedInput::new(&InputAnswers {
        elicitation: Some(Elicitation {
            action: ElicitAction::Decline,
            content: None,
        }),
        sampling: Some("mcpload probe".into()),
        roots: Some(Vec::new()),
        max_rounds: 1,
    })
}

/// Evidence of several exchanges: what the server sent besides, and the errors.
fn summary(o: &Observed) -> Evidence {
    Evidence {
        error_codes: o.responses.iter().filter_map(|r| r.error_code).collect(),
        server_messages: o.server_messages,
        unreadable: o.unreadable,
        note: o.failure.clone(),
        ..Evidence::default()
    }
}

impl Prober {
    /// The `task` probe.
    pub(super) async fn task(
        &mut self,
        offer: &TaskOffer,
        opts: &ProbeOptions,
    ) -> Result<ProbeResult, McpError> {
        let modern = self.server.revision.is_modern();
        let call = match &opts.task_call {
            Some(c) => Some(c.clone()),
            None if offer.calls_as_tasks() => task_call(&self.server.tools, modern),
            None => None,
        };
        let mut seen = Observed::default();
        let trip = match call {
            Some((tool, args)) => Some(self.task_trip(tool, args, opts, &mut seen).await?),
            None => None,
        };
        let (verdict, detail) = verdict_task(offer, trip.as_ref(), modern);
        let evidence = Evidence {
            task: trip,
            ..summary(&seen)
        };
        Ok(result("task", None, verdict, detail, evidence))
    }

    /// Sends `body` (one request, `id`) and waits at most `wait` for its answer; returns
    /// what came back, also added to `seen`.
    async fn ask(
        &mut self,
        body: Bytes,
        headers: &McpHeaders,
        id: &Id,
        wait: Duration,
        seen: &mut Observed,
    ) -> Observed {
        let o = self
            .exchange_within(body, headers, slice::from_ref(id), wait)
            .await;
        *seen = std::mem::take(seen).merge(o.clone());
        o
    }

    /// Sends a task follow-up for `task_id`, waiting at most `wait`.
    async fn follow_up(
        &mut self,
        rules: &FlowRules,
        method: TaskMethod,
        task_id: &str,
        n: u32,
        wait: Duration,
        seen: &mut Observed,
    ) -> (Observed, Id) {
        let req = id(&format!("probe-{}-{n}", method.as_str().replace('/', "-")));
        let mut body = Vec::new();
        let headers = rules.render_task(&mut body, &req, method, task_id);
        let o = self
            .ask(Bytes::from(body), &headers, &req, wait, seen)
            .await;
        (o, req)
    }

    /// One task round trip on `tool`, bounded by `opts.task_wait`.
    async fn task_trip(
        &mut self,
        tool: String,
        arguments: Value,
        opts: &ProbeOptions,
        seen: &mut Observed,
    ) -> Result<TaskTrip, McpError> {
        let started = Instant::now();
        let deadline = started + opts.task_wait;
        let left = |floor: Duration| {
            deadline
                .saturating_duration_since(Instant::now())
                .max(floor)
        };
        let revision = self.server.revision;
        let modern = revision.is_modern();
        let mut params = json!({"name": tool, "arguments": arguments});
        if modern {
            params["_meta"] = Value::Object(call_meta(None, true));
        } else {
            params["task"] = json!({});
        }
        let op = self.server.operation("tools/call", Some(&params))?;
        let call_id = id("probe-task");
        let o = self
            .ask(
                single_body(&op, &call_id),
                op.headers(),
                &call_id,
                left(self.wait),
                seen,
            )
            .await;
        let mut trip = TaskTrip::new(tool, arguments, Answer::of(&o, &call_id, modern));
        let created = o.response(&call_id).and_then(|r| r.result.clone());
        let view = created
            .as_ref()
            .and_then(|v| match read_call(&raw(v)?, modern) {
                CallAnswer::Task(view) => Some(view),
                _ => None,
            });
        let (Some(view), Some(created)) = (view, created) else {
            trip.elapsed_ms = started.elapsed().as_millis() as u64;
            return Ok(trip);
        };
        let rules = FlowRules::new(revision, None, SideOps::default());
        trip.task_id = Some(view.id.clone());
        trip.statuses.push(status_of(&created));
        trip.poll_interval_ms = millis(view.poll_interval);
        trip.ttl_ms = millis(view.ttl);
        let mut interval = view.poll_interval.unwrap_or(DEFAULT_POLL_INTERVAL);
        // The answer that carried the terminal status (2026-07-28: with the result inline).
        let mut terminal = view.status.is_terminal().then_some(created);
        let mut confirmed = false;
        let mut failing = 0;
        while !confirmed && failing < MAX_FAILING_POLLS {
            if terminal.is_none() {
                let pause = interval.max(MIN_POLL);
                if trip.polls >= MAX_POLLS || Instant::now() + pause >= deadline {
                    trip.unfinished = true;
                    break;
                }
                tokio::time::sleep(pause).await;
            }
            trip.polls += 1;
            let (o, req) = self
                .follow_up(
                    &rules,
                    TaskMethod::Get,
                    &view.id,
                    trip.polls,
                    left(self.wait),
                    seen,
                )
                .await;
            let answer = o.response(&req);
            let polled = answer
                .and_then(|r| r.result.as_ref())
                .and_then(|v| Some((read_task(&raw(v)?, modern)?, v)));
            failing += 1;
            match (polled, answer.and_then(|r| r.error_code)) {
                (Some((now, v)), _) => {
                    failing = 0;
                    trip.statuses.push(status_of(v));
                    if let Some(p) = now.poll_interval {
                        interval = p;
                        trip.poll_interval_ms = millis(Some(p));
                    }
                    if terminal.is_some() {
                        confirmed = true;
                    } else if now.status.is_terminal() {
                        terminal = Some(v.clone());
                    }
                }
                (None, Some(codes::INVALID_PARAMS)) => {
                    let ttl_passed = view.ttl.is_some_and(|ttl| started.elapsed() >= ttl);
                    trip.expired = ttl_passed;
                    trip.forgotten = !ttl_passed;
                    break;
                }
                (None, Some(code)) => trip.poll_errors.push(format!("error {code}")),
                (None, None) if answer.is_some() => {
                    trip.poll_errors.push("a result that is no task".into())
                }
                (None, None) => trip.poll_errors.push("no answer".into()),
            }
            if terminal.is_some() && !trip.poll_errors.is_empty() {
                break;
            }
        }
        let wait = left(self.answer_wait());
        self.task_end(&rules, &view, terminal.as_ref(), &mut trip, wait, seen)
            .await;
        trip.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(trip)
    }

    /// A round trip's end: the result of a terminal task (2025-11-25 `tasks/result`,
    /// 2026-07-28 inline in `terminal`), or `tasks/cancel` for one given up; each waited for
    /// at most `wait`.
    async fn task_end(
        &mut self,
        rules: &FlowRules,
        view: &TaskView,
        terminal: Option<&Value>,
        trip: &mut TaskTrip,
        wait: Duration,
        seen: &mut Observed,
    ) {
        let modern = self.server.revision.is_modern();
        let Some(terminal) = terminal else {
            // Given up (not terminal within the wait, or polls failing): cancelled, unless
            // the server no longer knows it.
            if !trip.forgotten && !trip.expired {
                let (o, req) = self
                    .follow_up(rules, TaskMethod::Cancel, &view.id, 1, wait, seen)
                    .await;
                trip.cancel = Some(Answer::of(&o, &req, modern));
            }
            return;
        };
        if Status::parse(&status_of(terminal)) == Status::Cancelled {
            return;
        }
        trip.result = if modern {
            if let Some(r) = terminal.get("result") {
                Some(Answer::of_result(r, true))
            } else {
                terminal.get("error").map(|e| Answer::Error {
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    required: Vec::new(),
                })
            }
        } else {
            let (o, req) = self
                .follow_up(rules, TaskMethod::Result, &view.id, 1, wait, seen)
                .await;
            Some(Answer::of(&o, &req, false))
        };
    }

    /// The `input_required` probe.
    pub(super) async fn input_required(
        &mut self,
        opts: &ProbeOptions,
    ) -> Result<ProbeResult, McpError> {
        let revision = self.server.revision;
        let call = if revision.is_modern() {
            opts.input_call
                .clone()
                .or_else(|| input_call(&self.server.tools))
        } else {
            None
        };
        let mut seen = Observed::default();
        let trip = match call {
            Some((tool, args)) => Some(self.input_trip(tool, args, opts, &mut seen).await?),
            None => None,
        };
        let (verdict, detail) = verdict_input(revision, trip.as_ref());
        let evidence = Evidence {
            input: trip,
            ..summary(&seen)
        };
        Ok(result("input_required", None, verdict, detail, evidence))
    }

    /// Calls `tool` without, then with, the client capabilities of every input kind; after
    /// an `input_required`, sends the call again with the answers.
    async fn input_trip(
        &mut self,
        tool: String,
        arguments: Value,
        opts: &ProbeOptions,
        seen: &mut Observed,
    ) -> Result<InputTrip, McpError> {
        // The answers are expected: each is waited for as long as a task.
        let wait = opts.task_wait;
        let bare = self.server.operation(
            "tools/call",
            Some(&json!({"name": tool, "arguments": arguments})),
        )?;
        let bare_id = id("probe-input-undeclared");
        let o = self
            .ask(
                single_body(&bare, &bare_id),
                bare.headers(),
                &bare_id,
                wait,
                seen,
            )
            .await;
        let undeclared = Answer::of(&o, &bare_id, true);
        let answers = probe_answers();
        let params = json!({"name": tool, "arguments": arguments,
                            "_meta": call_meta(Some(&answers), false)});
        let op = self.server.operation("tools/call", Some(&params))?;
        let call_id = id("probe-input");
        let first = single_body(&op, &call_id);
        let o = self
            .ask(first.clone(), op.headers(), &call_id, wait, seen)
            .await;
        let declared = Answer::of(&o, &call_id, true);
        let asked = o
            .response(&call_id)
            .and_then(|r| r.result.as_ref())
            .and_then(raw)
            .map(|r| read_call(&r, true));
        let mut retry = None;
        if let Some(CallAnswer::Input { requests, state }) = asked
            && let Ok(responses) = answers.respond(&requests)
        {
            let again = id("probe-input-retry");
            let mut body = Vec::new();
            render_retry(&mut body, &first, &again, responses, state).map_err(|detail| {
                McpError::Protocol {
                    step: "the input_required probe",
                    detail,
                }
            })?;
            let o = self
                .ask(Bytes::from(body), op.headers(), &again, wait, seen)
                .await;
            retry = Some(Answer::of(&o, &again, true));
        }
        Ok(InputTrip {
            tool,
            arguments,
            undeclared,
            declared,
            retry,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Era;

    fn tool(name: &str, schema: Value, support: TaskSupport) -> ToolInfo {
        let mut t = ToolInfo::new(name.into(), schema, Revision::V2025_11_25);
        t.task_support = support;
        t
    }

    fn server(revision: Revision, capabilities: Value, tools: Vec<ToolInfo>) -> ServerInfo {
        ServerInfo {
            era: revision.era(),
            revision,
            detection: String::new(),
            negotiation: Vec::new(),
            server_info: json!({}),
            capabilities,
            supported_versions: Vec::new(),
            session: false,
            transport: crate::client::TransportKind::StreamableHttp,
            tools,
        }
    }

    fn ms_schema() -> Value {
        json!({"properties": {"ms": {"type": "integer"}}, "required": ["ms"]})
    }

    #[test]
    fn the_offer_reads_each_revisions_declaration() {
        let tools = vec![
            tool("echo", json!({}), TaskSupport::Forbidden),
            tool("slow", ms_schema(), TaskSupport::Optional),
        ];
        let legacy = json!({"tasks": {"list": {}, "requests": {"tools": {"call": {}},
                            "sampling": {"createMessage": {}}}}});
        let o = task_offer(&server(
            Revision::V2025_11_25,
            legacy.clone(),
            tools.clone(),
        ));
        assert_eq!(o.declared, "capabilities.tasks");
        assert!(o.list && !o.cancel && o.calls_as_tasks());
        assert_eq!(o.requests, ["sampling/createMessage", "tools/call"]);
        assert_eq!(
            o.tools,
            [ToolTasks {
                name: "slow".into(),
                task_support: TaskSupport::Optional
            }]
        );
        // Before 2025-11-25 there are no tasks, whatever is declared.
        let o = task_offer(&server(Revision::V2025_06_18, legacy, vec![]));
        assert_eq!(o.declared, "none");
        let only_list = json!({"tasks": {"list": {}}});
        let o = task_offer(&server(Revision::V2025_11_25, only_list, vec![]));
        assert!(o.is_declared() && !o.calls_as_tasks());
        let modern = json!({"extensions": {TASKS_EXTENSION: {}}});
        let o = task_offer(&server(Revision::V2026_07_28, modern, vec![]));
        assert_eq!(o.declared, "extension");
        assert!(o.calls_as_tasks() && o.requests.is_empty());
        let o = task_offer(&server(Revision::V2026_07_28, json!({"tasks": {}}), vec![]));
        assert_eq!(o.declared, "none");
        assert_eq!(
            server(Revision::V2026_07_28, json!({}), vec![]).era,
            Era::Modern
        );
    }

    fn offer(declared: &'static str) -> TaskOffer {
        TaskOffer {
            declared,
            list: true,
            cancel: true,
            requests: vec!["tools/call".into()],
            tools: Vec::new(),
        }
    }

    fn trip(statuses: &[&str], result: Option<Answer>) -> TaskTrip {
        let mut t = TaskTrip::new(
            "slow".into(),
            json!({}),
            Answer::Task {
                status: statuses[0].into(),
            },
        );
        t.task_id = Some("t1".into());
        t.statuses = statuses.iter().map(|s| s.to_string()).collect();
        t.polls = statuses.len() as u32 - 1;
        t.result = result;
        t
    }

    const DONE: &[&str] = &["working", "working", "completed", "completed"];
    const OK: Option<Answer> = Some(Answer::Complete { is_error: false });

    #[test]
    fn a_task_that_ends_and_stays_with_its_result_is_supported() {
        let legacy = offer("capabilities.tasks");
        let good = trip(DONE, OK);
        assert_eq!(
            verdict_task(&legacy, Some(&good), false),
            ("supported", Some("completed".into()))
        );
        let failed = trip(
            &["working", "failed", "failed"],
            Some(Answer::Error {
                code: -32603,
                required: vec![],
            }),
        );
        assert_eq!(verdict_task(&legacy, Some(&failed), false).0, "supported");
        // 2025-11-25: a completed task whose result is a tool error disagrees; 2026-07-28
        // puts a tool error in a completed task's result.
        let tool_error = trip(DONE, Some(Answer::Complete { is_error: true }));
        let (v, why) = verdict_task(&legacy, Some(&tool_error), false);
        assert_eq!(v, "broken", "{why:?}");
        assert_eq!(
            verdict_task(&offer("extension"), Some(&tool_error), true).0,
            "supported"
        );
        let cancelled = trip(&["working", "cancelled", "cancelled"], None);
        assert_eq!(
            verdict_task(&legacy, Some(&cancelled), false),
            ("supported", Some("cancelled".into()))
        );
    }

    #[test]
    fn each_task_failure_is_broken_or_unfinished() {
        let legacy = offer("capabilities.tasks");
        let v = |t: &TaskTrip| verdict_task(&legacy, Some(t), false);
        let regressed = trip(&["working", "completed", "working"], OK);
        assert_eq!(
            v(&regressed),
            ("broken", Some("status completed went to working".into()))
        );
        assert_eq!(v(&trip(DONE, None)).0, "broken");
        let mut forgotten = trip(&["working"], None);
        forgotten.forgotten = true;
        assert_eq!(v(&forgotten).0, "broken");
        let mut expired = trip(&["working"], None);
        expired.expired = true;
        assert_eq!(v(&expired).0, "unfinished");
        let mut errors = trip(DONE, OK);
        errors.poll_errors = vec!["error -32603".into()];
        assert_eq!(
            v(&errors),
            ("broken", Some("polls answered error -32603".into()))
        );
        let mut unfinished = trip(&["working", "working"], None);
        unfinished.unfinished = true;
        assert_eq!(
            v(&unfinished),
            ("unfinished", Some("still working after 1 polls".into()))
        );
        assert_eq!(v(&trip(&["working", "done", "done"], OK)).0, "broken");
        let mut plain = trip(&["working"], None);
        plain.created = Answer::Complete { is_error: false };
        assert_eq!(v(&plain).0, "broken", "2025-11-25 must give a task");
        assert_eq!(
            verdict_task(&offer("extension"), Some(&plain), true).0,
            "no_task",
            "2026-07-28: the server decides"
        );
        plain.created = Answer::Error {
            code: -32601,
            required: vec![],
        };
        assert_eq!(
            v(&plain),
            ("broken", Some("the call was answered error -32601".into()))
        );
    }

    #[test]
    fn without_a_round_trip_the_declaration_decides() {
        let mut none = offer("none");
        none.requests.clear();
        assert_eq!(verdict_task(&none, None, false), ("unsupported", None));
        none.tools.push(ToolTasks {
            name: "t".into(),
            task_support: TaskSupport::Required,
        });
        assert_eq!(verdict_task(&none, None, false).0, "broken");
        let mut list_only = offer("capabilities.tasks");
        list_only.requests.clear();
        assert_eq!(verdict_task(&list_only, None, false).0, "unsupported");
        assert_eq!(verdict_task(&offer("extension"), None, true).0, "skipped");
    }

    fn input(undeclared: Answer, declared: Answer, retry: Option<Answer>) -> InputTrip {
        InputTrip {
            tool: "ask".into(),
            arguments: json!({}),
            undeclared,
            declared,
            retry,
        }
    }

    fn asked(kinds: &[&str], request_state: bool) -> Answer {
        Answer::InputRequired {
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            request_state,
        }
    }

    #[test]
    fn input_rounds_are_judged_with_and_without_capabilities() {
        let modern = Revision::V2026_07_28;
        let missing = Answer::Error {
            code: MISSING_CLIENT_CAPABILITY,
            required: vec!["elicitation".into()],
        };
        let done = Some(Answer::Complete { is_error: false });
        let good = input(missing.clone(), asked(&["elicitation"], true), done.clone());
        assert_eq!(
            verdict_input(modern, Some(&good)),
            ("supported", Some("needs elicitation".into()))
        );
        let lax = input(asked(&[], true), asked(&[], true), done.clone());
        assert_eq!(
            verdict_input(modern, Some(&lax)),
            ("supported", Some("capabilities not needed".into()))
        );
        let pushy = input(
            asked(&["sampling"], false),
            asked(&["sampling"], false),
            done,
        );
        assert_eq!(verdict_input(modern, Some(&pushy)).0, "broken");
        let empty = input(missing.clone(), asked(&[], false), None);
        assert_eq!(verdict_input(modern, Some(&empty)).0, "broken");
        let odd = input(missing.clone(), asked(&["other"], true), None);
        assert_eq!(verdict_input(modern, Some(&odd)).0, "broken");
        let refused_retry = input(
            missing.clone(),
            asked(&["roots"], true),
            Some(Answer::Error {
                code: -32602,
                required: vec![],
            }),
        );
        assert_eq!(verdict_input(modern, Some(&refused_retry)).0, "broken");
        let at_once = input(
            Answer::Complete { is_error: false },
            Answer::Complete { is_error: false },
            None,
        );
        assert_eq!(verdict_input(modern, Some(&at_once)).0, "not_asked");
        let refused = input(missing.clone(), missing, None);
        assert_eq!(verdict_input(modern, Some(&refused)).0, "refused");
        assert_eq!(verdict_input(modern, None).0, "skipped");
        assert_eq!(
            verdict_input(Revision::V2025_11_25, Some(&good)).0,
            "skipped"
        );
    }

    fn observed(text: &str) -> Observed {
        let mut o = Observed::default();
        o.add_text(text.as_bytes());
        o
    }

    #[test]
    fn answers_are_read_as_the_revision_writes_them() {
        let x = id("x");
        let created = observed(
            r#"{"jsonrpc":"2.0","id":"x","result":{"task":{"taskId":"t","status":"working"}}}"#,
        );
        assert_eq!(
            Answer::of(&created, &x, false),
            Answer::Task {
                status: "working".into()
            }
        );
        let modern = observed(
            r#"{"jsonrpc":"2.0","id":"x","result":{"resultType":"input_required",
            "inputRequests":{"a":{"method":"elicitation/create"},"b":{"method":"x/y"}},
            "requestState":"s"}}"#,
        );
        assert_eq!(
            Answer::of(&modern, &x, true),
            asked(&["elicitation", "other"], true)
        );
        let missing = observed(
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32021,"message":"",
            "data":{"requiredCapabilities":{"sampling":{}}}}}"#,
        );
        assert_eq!(
            Answer::of(&missing, &x, true),
            Answer::Error {
                code: -32021,
                required: vec!["sampling".into()]
            }
        );
        assert!(matches!(
            Answer::of(&Observed::default(), &x, true),
            Answer::NoAnswer { .. }
        ));
    }

    #[test]
    fn the_probed_tools_are_found_by_support_or_name() {
        let tools = vec![
            tool("echo", json!({}), TaskSupport::Forbidden),
            tool("maybe_task", ms_schema(), TaskSupport::Optional),
            tool("must_task", ms_schema(), TaskSupport::Required),
            tool("ask_input", json!({}), TaskSupport::Forbidden),
        ];
        assert_eq!(
            task_call(&tools, false),
            Some(("must_task".into(), json!({"ms": 500})))
        );
        assert_eq!(
            task_call(&tools[..2], false).map(|c| c.0).as_deref(),
            Some("maybe_task")
        );
        assert_eq!(task_call(&tools[..1], false), None);
        assert_eq!(
            task_call(&tools, true).map(|c| c.0).as_deref(),
            Some("maybe_task")
        );
        assert_eq!(input_call(&tools), Some(("ask_input".into(), json!({}))));
        assert_eq!(input_call(&tools[..3]), None);
        assert_eq!(
            runs(&["working".into(), "working".into(), "completed".into()]),
            "working x2 > completed"
        );
    }
}
