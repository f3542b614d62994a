//! The methods the target serves: a validated call with its arguments read ([`Call`]), the
//! tools (`echo`, `sleep`, `fail`, `tool_error`, `payload`, `progress`, the job API's
//! `job_start`, `job_status`, `job_report`, `job_lookup`, the race targets `counter_add` and
//! `counter_read`, the task tools `slow_task` and `task_only`, and `ask_input` with its
//! input-required rounds), the `tasks/*` methods, the
//! `mem://item/{n}` resources, the `greet` prompt, `initialize` / `server/discover`, and
//! their results.

use super::Shared;
use super::faults::{FaultKind, ProgressFault};
use super::input::{AskInput, SLEEP_MAX_MS, Step};
use super::job_api::{ITEMS_MAX, REQUEST_KEY_MAX};
use super::mcp::{ClientCaps, Params};
use super::param_tools;
use super::races;
use super::stats::{Stats, View};
use super::tasks::{NewTask, TaskOutcome};
use super::wire::{Outcome, Progress, invalid_params};
use crate::jsonrpc::{ErrorObject, codes};
use crate::protocol::Revision;
use crate::protocol::TASKS_EXTENSION;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::sync::LazyLock;
use std::time::Duration;

/// A method call that passed validation, with its arguments read and owned.
#[derive(Debug)]
pub(crate) enum Call {
    Initialize(Revision),
    Discover,
    Ping,
    ToolsList,
    Echo(Box<RawValue>),
    /// `region_echo`: its text, and the arguments it was sent (answered back).
    RegionEcho(Box<RawValue>, Value),
    Sleep(u64),
    Fail(i64, Option<String>),
    ToolError(Option<String>),
    Payload(usize),
    Progress {
        steps: u64,
        ms: u64,
    },
    JobStart {
        items: u64,
        request_key: Option<String>,
    },
    JobStatus(String),
    JobReport(String),
    /// `job_lookup`: the jobs a `request_key` started.
    JobLookup(String),
    /// `counter_add`: `by` added to counter `key`.
    CounterAdd {
        key: String,
        by: u64,
    },
    /// `counter_read`: counter `key` as readers see it.
    CounterRead(String),
    /// `slow_task` or `task_only`: work of `ms` that ends as `outcome` says, run now or as a
    /// task.
    TaskTool {
        ms: u64,
        outcome: OutcomeKind,
        mode: TaskMode,
    },
    AskInput(Box<AskInput>),
    TaskGet(String),
    TaskResult(String),
    TaskCancel(String),
    TaskUpdate(String),
    TaskList(Option<String>),
    /// 2026-07-28: the call needs client capabilities it did not declare (the
    /// `requiredCapabilities`); answered -32021 with HTTP 400.
    MissingCapability(Value),
    ResourcesList,
    TemplatesList,
    Read(String),
    PromptsList,
    GetPrompt(String),
    /// Validation of the arguments failed: answered with this error.
    Invalid(ErrorObject),
}

impl Call {
    /// A call of a tool (what a lazy initialisation holds up, and what leaks).
    fn is_tool(&self) -> bool {
        matches!(
            self,
            Call::Echo(_)
                | Call::RegionEcho(..)
                | Call::Sleep(_)
                | Call::Fail(..)
                | Call::ToolError(_)
                | Call::Payload(_)
                | Call::Progress { .. }
                | Call::JobStart { .. }
                | Call::JobStatus(_)
                | Call::JobReport(_)
                | Call::JobLookup(_)
                | Call::CounterAdd { .. }
                | Call::CounterRead(_)
                | Call::TaskTool { .. }
                | Call::AskInput(_)
        )
    }
}

/// How a task tool's call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskMode {
    /// Answered when the work is done.
    Now,
    /// As a task (2025-11-25: the `ttl` of `params.task`, if any).
    Task { ttl: Option<u64> },
}

/// How a task tool's work ends (its `outcome` argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutcomeKind {
    /// A tool result.
    Completed,
    /// A tool result with `isError: true`.
    ToolError,
    /// A JSON-RPC error.
    Failed,
}

impl OutcomeKind {
    const NAMES: [(&str, OutcomeKind); 3] = [
        ("completed", OutcomeKind::Completed),
        ("tool_error", OutcomeKind::ToolError),
        ("failed", OutcomeKind::Failed),
    ];

    /// What work of `ms` milliseconds ending this way answers.
    fn of(self, ms: u64) -> TaskOutcome {
        match self {
            OutcomeKind::Completed => {
                TaskOutcome::Result(text_result(&format!("slept {ms} ms"), false))
            }
            OutcomeKind::ToolError => TaskOutcome::Result(text_result(
                &format!("slept {ms} ms, then failed as asked"),
                true,
            )),
            OutcomeKind::Failed => TaskOutcome::Error(ErrorObject {
                code: codes::INTERNAL_ERROR,
                message: format!("slept {ms} ms, then failed as asked"),
                data: None,
            }),
        }
    }
}

/// A request ready to run.
pub(crate) struct Prepared {
    pub call: Call,
    pub version: Revision,
    pub progress: Option<Box<RawValue>>,
}

const PAYLOAD_MAX: usize = 64 << 20;
const PROGRESS_STEPS_MAX: u64 = 1_000;
const RESOURCE_NOT_FOUND: i64 = -32002;
/// `echo`'s `message` when the call leaves it out, so that `{}` is a valid call of the first
/// listed tool (the header conformance check calls it so).
const ECHO_DEFAULT: &str = "hello";
static ECHO_DEFAULT_JSON: LazyLock<Box<RawValue>> =
    LazyLock::new(|| serde_json::value::to_raw_value(ECHO_DEFAULT).expect("a string serialises"));

/// Runs a call on `shared` (its versions, job API, tasks, counters). Server notifications
/// (progress, task status) go to `progress` when the request has a stream.
pub(crate) async fn execute(
    prep: Prepared,
    shared: &Shared,
    progress: Option<Progress<'_>>,
) -> Outcome {
    let version = prep.version;
    let modern = version.is_modern();
    let ok = |v: Value, cacheable: bool| result_of(v, modern, cacheable);
    let jobs = &shared.jobs;
    let tasks = &shared.tasks;
    if prep.call.is_tool() {
        shared.leaks.on_tool_call(&shared.stats);
        shared.races.before_tool_call().await;
    }
    match prep.call {
        Call::Initialize(v) => Outcome::Result(finish(
            json!({
                "protocolVersion": v.as_str(),
                "capabilities": capabilities(v),
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            }),
            false,
            false,
        )),
        Call::Discover => {
            let mut r = json!({
                "supportedVersions": shared.protocol.supported(),
                "capabilities": capabilities(Revision::V2026_07_28),
                "instructions": INSTRUCTIONS,
                "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
            });
            cacheable_fields(&mut r);
            Outcome::Result(finish(r, true, false))
        }
        Call::Ping => Outcome::Result(b"{}".to_vec()),
        Call::ToolsList => Outcome::Result(
            tools_list(version, shared.cfg.header_tools)
                .as_bytes()
                .to_vec(),
        ),
        Call::Echo(text) => {
            let mut out = Vec::with_capacity(64 + text.get().len());
            out.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
            out.extend_from_slice(text.get().as_bytes());
            out.extend_from_slice(b"}]");
            if version >= STRUCTURED_SINCE {
                out.extend_from_slice(br#","structuredContent":{"message":"#);
                out.extend_from_slice(text.get().as_bytes());
                out.push(b'}');
            }
            if modern {
                out.extend_from_slice(br#","resultType":"complete""#);
            }
            out.push(b'}');
            Outcome::Result(out)
        }
        Call::RegionEcho(text, arguments) => {
            let text: String = serde_json::from_str(text.get()).unwrap_or_default();
            let mut result = text_result(&text, false);
            result["structuredContent"] = param_tools::received(&arguments);
            Outcome::Result(finish(result, modern, false))
        }
        Call::Sleep(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ok(text_result(&format!("slept {ms} ms"), false), false)
        }
        Call::Fail(code, message) => Outcome::Error(ErrorObject {
            code,
            message: message.unwrap_or_else(|| format!("fail tool: error {code} as asked")),
            data: None,
        }),
        Call::ToolError(message) => ok(
            text_result(
                message.as_deref().unwrap_or("tool_error: failed as asked"),
                true,
            ),
            false,
        ),
        Call::Payload(bytes) => {
            const PATTERN: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            let text: String = PATTERN
                .iter()
                .cycle()
                .take(bytes)
                .map(|b| *b as char)
                .collect();
            ok(text_result(&text, false), false)
        }
        Call::Progress { steps, ms } => {
            let stream = progress.zip(prep.progress.as_deref());
            send_progress(shared, stream, steps, ms).await;
            ok(text_result(&format!("done: {steps} steps"), false), false)
        }
        Call::JobStart { items, request_key } => structured(jobs.start(items, request_key), modern),
        Call::JobStatus(id) => structured(jobs.status(&id), modern),
        Call::JobReport(id) => structured(jobs.report(&id), modern),
        Call::JobLookup(key) => structured(Ok(jobs.lookup(&key)), modern),
        Call::CounterAdd { key, by } => structured(shared.races.add(key, by).await, modern),
        Call::CounterRead(key) => structured(Ok(shared.races.read(key)), modern),
        Call::ResourcesList => {
            let resources: Vec<Value> = (1..=3)
                .map(|n| {
                    json!({
                        "uri": format!("mem://item/{n}"),
                        "name": format!("item {n}"),
                        "mimeType": "text/plain",
                    })
                })
                .collect();
            ok(json!({ "resources": resources }), true)
        }
        Call::TemplatesList => ok(
            json!({"resourceTemplates": [{
                "uriTemplate": "mem://item/{n}",
                "name": "item",
                "description": "Item number n: a short text generated on the fly",
                "mimeType": "text/plain",
            }]}),
            true,
        ),
        Call::Read(uri) => match uri
            .strip_prefix("mem://item/")
            .and_then(|n| n.parse::<u64>().ok())
        {
            Some(n) => ok(
                json!({"contents": [{
                    "uri": uri,
                    "mimeType": "text/plain",
                    "text": format!("item {n}"),
                }]}),
                true,
            ),
            None => Outcome::Error(ErrorObject {
                code: RESOURCE_NOT_FOUND,
                message: "Resource not found".into(),
                data: Some(json!({ "uri": uri })),
            }),
        },
        Call::PromptsList => ok(
            json!({"prompts": [{
                "name": "greet",
                "description": "A greeting for someone",
                "arguments": [{
                    "name": "name",
                    "description": "Who to greet",
                    "required": true,
                }],
            }]}),
            true,
        ),
        Call::GetPrompt(who) => ok(
            json!({
                "description": "A greeting",
                "messages": [{
                    "role": "user",
                    "content": {"type": "text", "text": format!("Hello, {who}!")},
                }],
            }),
            false,
        ),
        Call::TaskTool { ms, outcome, mode } => match mode {
            TaskMode::Now => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                match outcome.of(ms) {
                    TaskOutcome::Result(r) => ok(r, false),
                    TaskOutcome::Error(e) => Outcome::Error(e),
                }
            }
            TaskMode::Task { ttl } => {
                let new = NewTask {
                    ms,
                    outcome: outcome.of(ms),
                    ttl,
                    legacy: !modern,
                };
                task_created(tasks.create(new, modern), modern)
            }
        },
        Call::AskInput(call) => match call.step(shared.salt, &shared.stats.input) {
            Ok(Step::Ask(mut v)) => {
                v["resultType"] = json!("input_required");
                Outcome::Result(serde_json::to_vec(&v).unwrap_or_default())
            }
            Ok(Step::Complete(r)) => ok(r, false),
            Ok(Step::Task) => {
                let new = NewTask {
                    ms: call.ms,
                    outcome: OutcomeKind::Completed.of(call.ms),
                    ttl: None,
                    legacy: false,
                };
                task_created(tasks.create(new, true), true)
            }
            Err(e) => Outcome::Error(e),
        },
        Call::TaskGet(id) => answer(tasks.get(&id, modern), modern),
        Call::TaskResult(id) => {
            let (result, note) = tasks.result(&id, progress.is_some()).await;
            if let (Some(progress), Some(note)) = (progress, note) {
                progress.send(note).await;
            }
            answer(result, false)
        }
        Call::TaskCancel(id) => answer(tasks.cancel(&id, modern), modern),
        Call::TaskUpdate(id) => answer(tasks.update(&id), modern),
        Call::TaskList(cursor) => answer(tasks.list(cursor.as_deref()), modern),
        Call::Invalid(e) => Outcome::Error(e),
        // Refused before it runs (see `Protocol::prepare`).
        Call::MissingCapability(required) => {
            Outcome::Error(super::mcp::ClientCaps::missing(required).error)
        }
    }
}

/// A result or error of the task store, answered as the revision says.
fn answer(r: Result<Value, ErrorObject>, modern: bool) -> Outcome {
    match r {
        Ok(v) => result_of(v, modern, false),
        Err(e) => Outcome::Error(e),
    }
}

/// A result serialised as the revision says; one with `isError: true` is a tool error, which
/// a correct client does not count `ok`.
fn result_of(v: Value, modern: bool, cacheable: bool) -> Outcome {
    let tool_error = v.get("isError") == Some(&Value::Bool(true));
    let bytes = finish(v, modern, cacheable);
    if tool_error {
        Outcome::Flawed(bytes, View::ToolErrors)
    } else {
        Outcome::Result(bytes)
    }
}

/// The revision that brought `outputSchema` and `structuredContent`.
const STRUCTURED_SINCE: Revision = Revision::V2025_06_18;

/// Whether `tool` lists an `outputSchema` at `version` (see [`output_schema`]).
pub(crate) fn declares_output_schema(tool: &str, version: Revision) -> bool {
    version >= STRUCTURED_SINCE && output_schema(tool).is_some()
}

/// The `outputSchema` of the built-in tools whose results carry `structuredContent`.
fn output_schema(tool: &str) -> Option<Value> {
    let object = |props: Value, required: &[&str]| {
        Some(json!({"type": "object", "properties": props, "required": required}))
    };
    let (string, integer) = (json!({"type": "string"}), json!({"type": "integer"}));
    let job = |extra: Value, required: &[&str]| {
        let mut props = json!({"job_id": string, "state": string});
        if let (Value::Object(p), Value::Object(e)) = (&mut props, extra) {
            p.extend(e);
        }
        object(props, required)
    };
    match tool {
        "echo" => object(json!({"message": string}), &["message"]),
        "counter_add" | "counter_read" => {
            object(json!({"key": string, "value": integer}), &["key", "value"])
        }
        "job_start" => job(json!({}), &["job_id", "state"]),
        "job_status" => job(
            json!({"processed": integer, "total": integer, "pollInterval": integer}),
            &["job_id", "state", "processed", "total"],
        ),
        "job_report" => job(
            json!({
                "total": integer,
                "items": {"type": "array", "items": {"type": "object"}},
                "succeeded": integer,
                "failed": integer,
            }),
            &["job_id", "state", "total", "items", "succeeded", "failed"],
        ),
        "job_lookup" => object(
            json!({
                "request_key": string,
                "count": integer,
                "job_ids": {"type": "array", "items": string},
            }),
            &["request_key", "count", "job_ids"],
        ),
        _ => None,
    }
}

/// Applies a fault that changes a `tools/call` result of `tool` (answered at `version`):
/// `tool-error` makes it a tool error, `bad-structured` empties the `structuredContent` of
/// a tool that declares an `outputSchema`, so that its required members are missing. The
/// outcome comes back untouched (`Err`) where the fault does not apply: no `tools/call`, an
/// error, a result that is a tool error already, no schema or no `structuredContent`.
pub(crate) fn spoil_result(
    kind: FaultKind,
    outcome: Outcome,
    tool: Option<&str>,
    version: Revision,
) -> Result<Outcome, Outcome> {
    let (Some(tool), Outcome::Result(bytes)) = (tool, &outcome) else {
        return Err(outcome);
    };
    match kind {
        FaultKind::ToolError => {
            let failed = text_result("mcpload serve: injected fault tool-error", true);
            Ok(result_of(failed, version.is_modern(), false))
        }
        FaultKind::BadStructured if declares_output_schema(tool, version) => {
            match serde_json::from_slice::<Value>(bytes) {
                Ok(Value::Object(mut r)) if r.contains_key("structuredContent") => {
                    r.insert("structuredContent".into(), json!({}));
                    let bytes = serde_json::to_vec(&r).unwrap_or_default();
                    Ok(Outcome::Flawed(bytes, View::OutputSchemaViolations))
                }
                _ => Err(outcome),
            }
        }
        _ => Err(outcome),
    }
}

/// A `CreateTaskResult` (2026-07-28: it carries `resultType: "task"` already).
fn task_created(r: Result<Value, ErrorObject>, modern: bool) -> Outcome {
    match r {
        Ok(v) if modern => Outcome::Result(serde_json::to_vec(&v).unwrap_or_default()),
        other => answer(other, false),
    }
}

/// Sends the `progress` tool's notifications (`steps`, `ms` apart) to `stream` (its sink
/// and the request's token), spoiled as `progress_fault` says for this call, and counts them.
async fn send_progress(
    shared: &Shared,
    stream: Option<(Progress<'_>, &RawValue)>,
    steps: u64,
    ms: u64,
) {
    let counters = &shared.stats.progress;
    // Calls without a token or a stream are not numbered: their faults could not show.
    let n = match stream {
        Some(_) => {
            counters
                .calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1
        }
        None => 0,
    };
    let faults = shared.cfg.progress_fault;
    let hits = |k: ProgressFault| n > 0 && faults.hits(k, n);
    let note = |token: &RawValue, progress: Value, message: String| {
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": token,
                "progress": progress,
                "total": steps,
                "message": message,
            },
        });
        serde_json::to_vec(&note).unwrap_or_default()
    };
    let sent = |extra: Option<&std::sync::atomic::AtomicU64>| {
        Stats::add(&counters.sent, 1);
        if let Some(extra) = extra {
            Stats::add(extra, 1);
        }
    };
    if let Some((progress, _)) = stream
        && hits(ProgressFault::UnknownToken)
    {
        let stranger = format!("\"mcpload-unknown-token-{n}\"");
        if let Ok(token) = RawValue::from_string(stranger)
            && progress
                .send(note(&token, json!(0), "for a token never issued".into()))
                .await
        {
            sent(Some(&counters.unknown_token));
        }
    }
    for step in 1..=steps {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let Some((progress, token)) = stream else {
            continue;
        };
        let down = step == 2 && hits(ProgressFault::Down);
        let value = if down { json!(0.5) } else { json!(step) };
        if progress
            .send(note(token, value, format!("step {step} of {steps}")))
            .await
        {
            sent(down.then_some(&counters.down));
        }
    }
    if let Some((progress, token)) = stream
        && hits(ProgressFault::AfterResult)
    {
        progress.after_answer(note(token, json!(steps), "after the result".into()));
    }
}

/// Reads `tools/call` params into a call at `version` (argument errors become
/// [`Call::Invalid`]); `caps` are a 2026-07-28 client's declared capabilities.
pub(crate) fn tool_call(p: &Params, version: Revision, caps: ClientCaps) -> Call {
    #[derive(Default, Deserialize)]
    struct Args<'a> {
        #[serde(default, borrow)]
        message: Option<&'a RawValue>,
        #[serde(default)]
        ms: Option<u64>,
        #[serde(default)]
        code: Option<i64>,
        #[serde(default)]
        bytes: Option<u64>,
        #[serde(default)]
        steps: Option<u64>,
        #[serde(default)]
        items: Option<u64>,
        #[serde(default)]
        request_key: Option<String>,
        #[serde(default)]
        job_id: Option<String>,
        #[serde(default)]
        outcome: Option<String>,
        #[serde(default)]
        key: Option<String>,
        #[serde(default)]
        by: Option<u64>,
    }
    let Some(name) = p.name.as_deref() else {
        return Call::Invalid(invalid_params("tools/call needs `name`"));
    };
    let modern = version.is_modern();
    // 2025-11-25: a task-augmented call (`params.task`). Under 2026-07-28 the member is
    // ignored (SEP-2663); before 2025-11-25 it does not exist.
    let task = match p.task {
        Some(raw) if version == Revision::V2025_11_25 => {
            match serde_json::from_str::<Value>(raw.get()) {
                Ok(Value::Object(m)) => Some(m.get("ttl").and_then(Value::as_u64)),
                _ => return Call::Invalid(invalid_params("params.task must be an object")),
            }
        }
        _ => None,
    };
    let task_tool = matches!(name, "slow_task" | "task_only");
    if task.is_some() && !task_tool {
        // 2025-11-25, tool-level negotiation: taskSupport absent means forbidden.
        return Call::Invalid(ErrorObject {
            code: codes::METHOD_NOT_FOUND,
            message: format!("Tool {name} does not support task-augmented execution"),
            data: None,
        });
    }
    let args = match p.arguments {
        None => Args::default(),
        Some(raw) => match serde_json::from_str::<Args>(raw.get()) {
            Ok(a) => a,
            Err(e) => {
                return Call::Invalid(invalid_params(format!(
                    "Invalid arguments for tool {name}: {e}"
                )));
            }
        },
    };
    let text = |raw: Option<&RawValue>| -> Result<Option<String>, ErrorObject> {
        match raw {
            None => Ok(None),
            Some(r) => serde_json::from_str::<String>(r.get())
                .map(Some)
                .map_err(|_| {
                    invalid_params(format!(
                        "Invalid arguments for tool {name}: `message` must be a string"
                    ))
                }),
        }
    };
    let need = |v: Option<u64>, what: &str, max: u64| -> Result<u64, ErrorObject> {
        match v {
            Some(v) if v <= max => Ok(v),
            Some(_) => Err(invalid_params(format!(
                "Invalid arguments for tool {name}: `{what}` above {max}"
            ))),
            None => Err(invalid_params(format!(
                "Invalid arguments for tool {name}: missing `{what}`"
            ))),
        }
    };
    let call = match name {
        "echo" | param_tools::REGION_ECHO => match args.message {
            Some(m) if !m.get().starts_with('"') => Err(invalid_params(format!(
                "Invalid arguments for tool {name}: `message` must be a string"
            ))),
            m => {
                let text = m.map_or_else(|| ECHO_DEFAULT_JSON.to_owned(), ToOwned::to_owned);
                Ok(if name == "echo" {
                    Call::Echo(text)
                } else {
                    let arguments = p.arguments.and_then(|a| serde_json::from_str(a.get()).ok());
                    Call::RegionEcho(text, arguments.unwrap_or_default())
                })
            }
        },
        "sleep" => need(args.ms, "ms", SLEEP_MAX_MS).map(Call::Sleep),
        "fail" => match args.code {
            Some(code) => text(args.message).map(|m| Call::Fail(code, m)),
            None => Err(invalid_params(
                "Invalid arguments for tool fail: missing `code`",
            )),
        },
        "tool_error" => text(args.message).map(Call::ToolError),
        "payload" => {
            need(args.bytes, "bytes", PAYLOAD_MAX as u64).map(|b| Call::Payload(b as usize))
        }
        "progress" => need(args.steps, "steps", PROGRESS_STEPS_MAX).and_then(|steps| {
            Ok(Call::Progress {
                steps,
                ms: need(args.ms, "ms", SLEEP_MAX_MS)?,
            })
        }),
        "job_start" => need(args.items, "items", ITEMS_MAX).and_then(|items| {
            if items == 0 {
                return Err(invalid_params(
                    "Invalid arguments for tool job_start: `items` below 1",
                ));
            }
            match args.request_key {
                Some(k) if k.len() > REQUEST_KEY_MAX => Err(invalid_params(format!(
                    "Invalid arguments for tool job_start: `request_key` over {REQUEST_KEY_MAX} bytes"
                ))),
                request_key => Ok(Call::JobStart { items, request_key }),
            }
        }),
        "slow_task" | "task_only" => need(args.ms, "ms", SLEEP_MAX_MS).and_then(|ms| {
            let outcome = match args.outcome.as_deref() {
                None => OutcomeKind::Completed,
                Some(o) => OutcomeKind::NAMES
                    .iter()
                    .find(|(n, _)| *n == o)
                    .map(|(_, k)| *k)
                    .ok_or_else(|| {
                        invalid_params(format!(
                            "Invalid arguments for tool {name}: `outcome` is completed, \
                             tool_error or failed"
                        ))
                    })?,
            };
            let required = name == "task_only";
            let mode = if modern {
                // The server decides: a task whenever the client declares the extension.
                if caps.tasks {
                    TaskMode::Task { ttl: None }
                } else if required {
                    return Ok(Call::MissingCapability(ClientCaps::tasks_required()));
                } else {
                    TaskMode::Now
                }
            } else {
                match task {
                    Some(ttl) => TaskMode::Task { ttl },
                    None if !required => TaskMode::Now,
                    // 2025-11-25: taskSupport `required` called without a task: -32601
                    // (older revisions have no tasks at all).
                    None => {
                        return Err(ErrorObject {
                            code: codes::METHOD_NOT_FOUND,
                            message: if version == Revision::V2025_11_25 {
                                "Task augmentation required for tools/call of task_only".into()
                            } else {
                                format!(
                                    "task_only runs only as a task: 2025-11-25 or later, not {}",
                                    version.as_str()
                                )
                            },
                            data: None,
                        });
                    }
                }
            };
            Ok(Call::TaskTool { ms, outcome, mode })
        }),
        "ask_input" if modern => {
            let state = p.request_state.as_deref().map(str::to_owned);
            AskInput::read(
                p.arguments.map(RawValue::get),
                p.input_responses.map(RawValue::get),
                state,
            )
            .map(|call| {
                let mut required = serde_json::Map::new();
                for kind in call.kinds().filter(|k| !caps.has(*k)) {
                    required.insert(kind.name().into(), json!({}));
                }
                if call.then_task && !caps.tasks {
                    required.insert("extensions".into(), json!({TASKS_EXTENSION: {}}));
                }
                if required.is_empty() {
                    Call::AskInput(Box::new(call))
                } else {
                    Call::MissingCapability(Value::Object(required))
                }
            })
        }
        "job_lookup" => match args.request_key {
            Some(k) if k.len() <= REQUEST_KEY_MAX => Ok(Call::JobLookup(k)),
            Some(_) => Err(invalid_params(format!(
                "Invalid arguments for tool job_lookup: `request_key` over {REQUEST_KEY_MAX} bytes"
            ))),
            None => Err(invalid_params(
                "Invalid arguments for tool job_lookup: missing `request_key`",
            )),
        },
        "counter_add" | "counter_read" => {
            let key = args.key.unwrap_or_else(|| races::DEFAULT_KEY.to_owned());
            if key.len() > races::KEY_MAX {
                Err(invalid_params(format!(
                    "Invalid arguments for tool {name}: `key` over {} bytes",
                    races::KEY_MAX
                )))
            } else if name == "counter_read" {
                Ok(Call::CounterRead(key))
            } else {
                let by = args.by.unwrap_or(1);
                if by > races::BY_MAX {
                    Err(invalid_params(format!(
                        "Invalid arguments for tool counter_add: `by` above {}",
                        races::BY_MAX
                    )))
                } else {
                    Ok(Call::CounterAdd { key, by })
                }
            }
        }
        "job_status" | "job_report" => match args.job_id {
            Some(id) if name == "job_status" => Ok(Call::JobStatus(id)),
            Some(id) => Ok(Call::JobReport(id)),
            None => Err(invalid_params(format!(
                "Invalid arguments for tool {name}: missing `job_id`"
            ))),
        },
        _ => Err(invalid_params(format!("Unknown tool: {name}"))),
    };
    call.unwrap_or_else(Call::Invalid)
}

/// Reads `prompts/get` params: the one prompt, `greet {name}`.
pub(crate) fn prompt_call(p: &Params) -> Call {
    #[derive(Deserialize)]
    struct Args {
        name: String,
    }
    match p.name.as_deref() {
        Some("greet") => match p.arguments.map(|a| serde_json::from_str::<Args>(a.get())) {
            Some(Ok(a)) => Call::GetPrompt(a.name),
            _ => Call::Invalid(invalid_params(
                "prompt greet needs the argument `name` (a string)",
            )),
        },
        Some(other) => Call::Invalid(invalid_params(format!("Unknown prompt: {other}"))),
        None => Call::Invalid(invalid_params("prompts/get needs `name`")),
    }
}

const INSTRUCTIONS: &str = "mcpload's built-in reference target: echo, sleep, fail, tool_error, \
payload and progress tools, a job API (job_start, job_status, job_report, job_lookup), a \
counter (counter_add, counter_read), task tools (slow_task, task_only), input-required rounds \
(ask_input, 2026-07-28), mem://item/{n} resources and a greet prompt.";

fn server_info() -> Value {
    json!({"name": "mcpload-serve", "version": env!("CARGO_PKG_VERSION")})
}

/// The server capabilities at `v`: tasks as 2025-11-25 declares them (list, cancel,
/// task-augmented `tools/call`), or as the 2026-07-28 extension.
fn capabilities(v: Revision) -> Value {
    let mut caps = json!({"tools": {"listChanged": false}, "resources": {}, "prompts": {}});
    if v.is_modern() {
        caps["extensions"] = json!({TASKS_EXTENSION: {}});
    } else if v == Revision::V2025_11_25 {
        caps["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    caps
}

fn cacheable_fields(v: &mut Value) {
    if let Value::Object(m) = v {
        m.insert("ttlMs".into(), json!(0));
        m.insert("cacheScope".into(), json!("public"));
    }
}

/// Serialises a result; 2026-07-28 adds `resultType` (and the cache hints where required).
fn finish(mut v: Value, modern: bool, cacheable: bool) -> Vec<u8> {
    if modern && let Value::Object(m) = &mut v {
        m.insert("resultType".into(), json!("complete"));
        if cacheable {
            cacheable_fields(&mut v);
        }
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// A job API answer: `structuredContent`, mirrored as JSON text in `content`; a refusal is
/// a JSON-RPC error.
fn structured(answer: Result<Value, ErrorObject>, modern: bool) -> Outcome {
    match answer {
        Ok(v) => {
            let mut result = text_result(&v.to_string(), false);
            result["structuredContent"] = v;
            Outcome::Result(finish(result, modern, false))
        }
        Err(e) => Outcome::Error(e),
    }
}

/// The `tools/list` result at `v`, serialised once per shape: before 2025-06-18 (no
/// `outputSchema`), 2025-06-18 (`outputSchema` of the tools with structured results),
/// 2025-11-25 (`execution.taskSupport`), 2026-07-28 (no `execution`: the tasks extension
/// drops it; `ask_input` added), 2026-07-28 with the `x-mcp-header` tools (`header_tools`).
fn tools_list(v: Revision, header_tools: bool) -> &'static str {
    match v {
        Revision::V2026_07_28 if header_tools => &TOOLS_LIST[4],
        Revision::V2026_07_28 => &TOOLS_LIST[3],
        Revision::V2025_11_25 => &TOOLS_LIST[2],
        Revision::V2025_06_18 => &TOOLS_LIST[1],
        _ => &TOOLS_LIST[0],
    }
}

static TOOLS_LIST: LazyLock<[String; 5]> = LazyLock::new(|| {
    let int = |min: u64, max: u64, what: &str| {
        json!({
            "type": "integer",
            "minimum": min,
            "maximum": max,
            "description": what,
        })
    };
    let text = |what: &str| json!({"type": "string", "description": what});
    let tool = |name: &str, description: &str, props: Value, required: &[&str]| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": props, "required": required},
        })
    };
    let outcome = json!({
        "type": "string",
        "enum": ["completed", "tool_error", "failed"],
        "default": "completed",
        "description": "How the work ends: a result, a result with isError, a JSON-RPC error",
    });
    let task_props = json!({
        "ms": int(0, SLEEP_MAX_MS, "Milliseconds of work"),
        "outcome": outcome,
    });
    let mut tools = json!([
        tool(
            "echo",
            "Returns `message` as text (`hello` when left out).",
            json!({"message": {
                "type": "string",
                "description": "Text to send back",
                "default": ECHO_DEFAULT,
            }}),
            &[],
        ),
        tool(
            "sleep",
            "Waits `ms` milliseconds, then answers.",
            json!({"ms": int(0, SLEEP_MAX_MS, "Milliseconds to wait")}),
            &["ms"],
        ),
        tool(
            "fail",
            "Answers with a JSON-RPC error of the given `code`.",
            json!({
                "code": {"type": "integer", "description": "JSON-RPC error code"},
                "message": text("Error message"),
            }),
            &["code"],
        ),
        tool(
            "tool_error",
            "Answers with a tool result that has isError: true.",
            json!({"message": text("Text of the failed result")}),
            &[],
        ),
        tool(
            "payload",
            "Answers with a text of exactly `bytes` bytes.",
            json!({"bytes": int(0, PAYLOAD_MAX as u64, "Size of the text")}),
            &["bytes"],
        ),
        tool(
            "progress",
            "Reports progress `steps` times, `ms` apart (given a progress token), then answers.",
            json!({
                "steps": int(1, PROGRESS_STEPS_MAX, "Progress notifications to send"),
                "ms": int(0, SLEEP_MAX_MS, "Milliseconds between them"),
            }),
            &["steps", "ms"],
        ),
        tool(
            "job_start",
            "Starts a job of `items` items (see job_status, job_report); the same \
             `request_key` with the same input returns the same job.",
            json!({
                "items": int(1, ITEMS_MAX, "Items the job processes"),
                "request_key": {
                    "type": "string",
                    "maxLength": REQUEST_KEY_MAX,
                    "description": "Idempotency key, bound to the input",
                },
            }),
            &["items"],
        ),
        tool(
            "job_status",
            "A job's state (queued, running, succeeded, partial, failed), items processed, \
             total, and pollInterval (ms).",
            json!({"job_id": text("The job_id job_start answered")}),
            &["job_id"],
        ),
        tool(
            "job_report",
            "A finished job's items with their outcomes and the succeeded/failed counts \
             (an error while it runs).",
            json!({"job_id": text("The job_id job_start answered")}),
            &["job_id"],
        ),
        tool(
            "job_lookup",
            "The jobs held that `request_key` started (`job_ids`, `count`): more than one \
             is a double effect.",
            json!({"request_key": {
                "type": "string",
                "maxLength": REQUEST_KEY_MAX,
                "description": "The idempotency key job_start was given",
            }}),
            &["request_key"],
        ),
        tool(
            "counter_add",
            "Adds `by` to the counter `key` and answers the value it left (`key`, `value`).",
            json!({
                "key": {
                    "type": "string",
                    "maxLength": races::KEY_MAX,
                    "default": races::DEFAULT_KEY,
                    "description": "The counter",
                },
                "by": int(0, races::BY_MAX, "The increment (default 1)"),
            }),
            &[],
        ),
        tool(
            "counter_read",
            "The value of the counter `key` (`key`, `value`; 0 for a counter never added to).",
            json!({"key": {
                "type": "string",
                "maxLength": races::KEY_MAX,
                "default": races::DEFAULT_KEY,
                "description": "The counter",
            }}),
            &[],
        ),
        tool(
            "slow_task",
            "Works `ms` milliseconds, then ends as `outcome` says; runs as a task when the \
             client asks (2025-11-25 params.task) or declares the tasks extension (2026-07-28).",
            task_props.clone(),
            &["ms"],
        ),
        tool(
            "task_only",
            "As slow_task, but runs only as a task (taskSupport required).",
            task_props,
            &["ms"],
        ),
    ]);
    let text_of = |v: &Value, modern: bool| {
        String::from_utf8(finish(json!({ "tools": v }), modern, true)).unwrap_or_default()
    };
    let before_structured = text_of(&tools, false);
    for t in tools.as_array_mut().into_iter().flatten() {
        if let Some(schema) = t["name"].as_str().and_then(output_schema) {
            t["outputSchema"] = schema;
        }
    }
    let before_tasks = text_of(&tools, false);
    let mut with_tasks = tools.clone();
    for (t, support) in with_tasks
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            match t["name"].as_str() {
                Some("slow_task") => Some("optional"),
                Some("task_only") => Some("required"),
                _ => None,
            }
            .map(|s| (t, s))
        })
    {
        t["execution"] = json!({ "taskSupport": support });
    }
    let tasks_legacy = text_of(&with_tasks, false);
    if let Some(list) = tools.as_array_mut() {
        list.push(tool(
            "ask_input",
            "Asks for input `rounds` times (input_required: one request per kind of `kinds`), \
             then completes, or becomes a task of `ms` (`then`). 2026-07-28 only.",
            json!({
                "rounds": int(1, super::input::ROUNDS_MAX, "Input rounds before the end"),
                "kinds": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["elicitation", "sampling", "roots"]},
                    "default": ["elicitation"],
                    "description": "Input requests of each round",
                },
                "then": {
                    "type": "string",
                    "enum": ["complete", "task"],
                    "default": "complete",
                    "description": "After the last round: the result, or a task",
                },
                "ms": int(0, SLEEP_MAX_MS, "Milliseconds of work of the task"),
            }),
            &[],
        ));
    }
    let modern = text_of(&tools, true);
    if let Some(list) = tools.as_array_mut() {
        list.extend(super::param_tools::tools());
    }
    [
        before_structured,
        before_tasks,
        tasks_legacy,
        modern,
        text_of(&tools, true),
    ]
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::stats::KNOWN_OPERATIONS;

    /// A tool the target lists but counts under a lock would serialise every call of it on
    /// one mutex shared by all connections.
    #[test]
    fn every_callable_listed_tool_is_counted_without_a_lock() {
        for (v, header_tools) in [
            (Revision::V2025_06_18, false),
            (Revision::V2025_11_25, false),
            (Revision::V2026_07_28, true),
        ] {
            let list: Value = serde_json::from_str(tools_list(v, header_tools)).unwrap();
            let names: Vec<&str> = list["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["name"].as_str())
                .filter(|n| !n.starts_with("bad_header_"))
                .collect();
            assert!(names.contains(&"echo"), "{names:?}");
            for name in names {
                assert!(KNOWN_OPERATIONS.contains(&name), "{name} at {v:?}");
            }
        }
    }
}
