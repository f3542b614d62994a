//! What task mode and input-required rounds need of the mix, fixed once for the agreed
//! revision: which operations run as tasks, their poll interval and timeout, the canned input
//! answers, the follow-up requests (`tasks/get`, `tasks/result`, `tasks/cancel`, a call sent
//! again with `inputResponses`) rendered as the revision says, and the reading of the answers
//! that steer a call (a task, an `input_required` result, a task's status).

use super::mix::OpNames;
use crate::client::{Revision, header_value};
use crate::correlator::InputCover;
use crate::jsonrpc::{Id, encode_request_with};
use crate::metrics::AskedKind;
use crate::profile::{ElicitAction, InputAnswers};
use crate::transport::McpHeaders;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// The longest a task call takes when the profile does not say (`task_timeout`).
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(60);
/// The poll interval when neither the server nor the profile gives one.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How one mix operation runs when it is more than one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpFlow {
    /// The call asks for a task.
    pub task: bool,
    /// The profile's poll interval (used when shorter than the server's).
    pub poll_interval: Option<Duration>,
    /// The longest the whole call may take.
    pub timeout: Duration,
    /// Poll once more after a terminal status, to see that it stays.
    pub confirm: bool,
}

/// The follow-up requests of task mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskMethod {
    Get,
    Result,
    Cancel,
}

impl TaskMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskMethod::Get => "tasks/get",
            TaskMethod::Result => "tasks/result",
            TaskMethod::Cancel => "tasks/cancel",
        }
    }
}

/// The operation numbers task follow-ups count under (their own rows of ops.csv).
#[derive(Clone, Copy, Debug, Default)]
pub struct SideOps {
    pub get: u16,
    pub result: u16,
    pub cancel: u16,
}

impl SideOps {
    pub fn of(&self, m: TaskMethod) -> u16 {
        match m {
            TaskMethod::Get => self.get,
            TaskMethod::Result => self.result,
            TaskMethod::Cancel => self.cancel,
        }
    }

    /// Numbers the three follow-ups after the mix's own operations.
    pub fn number(names: &mut OpNames) -> Result<SideOps, String> {
        Ok(SideOps {
            get: names.number(TaskMethod::Get.as_str())?,
            result: names.number(TaskMethod::Result.as_str())?,
            cancel: names.number(TaskMethod::Cancel.as_str())?,
        })
    }
}

/// The run-wide rules of calls that take more than one request.
#[derive(Debug)]
pub struct FlowRules {
    pub revision: Revision,
    /// The `_meta` of follow-ups (2026-07-28), serialised once.
    meta: Option<Box<str>>,
    pub input: Option<CannedInput>,
    pub side: SideOps,
}

impl FlowRules {
    pub fn new(revision: Revision, input: Option<CannedInput>, side: SideOps) -> Self {
        let meta = revision.is_modern().then(|| {
            let caps = client_capabilities(input.as_ref(), true);
            Value::Object(meta_with(caps)).to_string().into()
        });
        FlowRules {
            revision,
            meta,
            input,
            side,
        }
    }

    /// Renders a task follow-up for `task_id`; returns its headers (2026-07-28: `Mcp-Method`,
    /// and `Mcp-Name` carrying the task id).
    pub fn render_task(
        &self,
        out: &mut Vec<u8>,
        id: &Id,
        method: TaskMethod,
        task_id: &str,
    ) -> McpHeaders {
        encode_request_with(out, id, method.as_str(), |o| {
            o.extend_from_slice(br#"{"taskId":"#);
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *o, task_id);
            if let Some(m) = &self.meta {
                o.extend_from_slice(br#","_meta":"#);
                o.extend_from_slice(m.as_bytes());
            }
            o.push(b'}');
        });
        if !self.revision.is_modern() {
            return McpHeaders::default();
        }
        McpHeaders {
            method: Some(header_value(method.as_str())),
            name: Some(header_value(task_id)),
            params: None,
        }
    }
}

/// Renders `first` (a whole request as sent) again with id `id`, `inputResponses` and the
/// echoed `requestState` in its params (2026-07-28's retry of an `input_required` call).
pub fn render_retry(
    out: &mut Vec<u8>,
    first: &[u8],
    id: &Id,
    responses: Map<String, Value>,
    state: Option<Value>,
) -> Result<(), String> {
    let mut request: Value =
        serde_json::from_slice(first).map_err(|e| format!("the call is no JSON: {e}"))?;
    request["id"] = serde_json::to_value(id).unwrap_or(Value::Null);
    let params = request
        .get_mut("params")
        .and_then(Value::as_object_mut)
        .ok_or("the call has no params object")?;
    params.insert("inputResponses".into(), Value::Object(responses));
    // A progress token is the request's own id: the retry's is its new one.
    if let Some(token) = params
        .get_mut("_meta")
        .and_then(|m| m.get_mut("progressToken"))
    {
        *token = serde_json::to_value(id).unwrap_or(Value::Null);
    }
    match state {
        Some(s) => params.insert("requestState".into(), s),
        None => params.remove("requestState"),
    };
    serde_json::to_writer(out, &request).map_err(|e| e.to_string())
}

/// The client capabilities a call declares (2026-07-28): with `[input]`, every input kind
/// (so that a server may ask for one the profile has no answer for, and it is counted), and
/// the tasks extension for a task.
pub fn client_capabilities(input: Option<&CannedInput>, task: bool) -> Map<String, Value> {
    let mut caps = Map::new();
    if input.is_some() {
        for kind in ANSWERABLE {
            caps.insert(kind.name().into(), json!({}));
        }
    }
    if task {
        caps.insert(
            "extensions".into(),
            json!({ crate::protocol::TASKS_EXTENSION: {} }),
        );
    }
    caps
}

/// The era's `_meta` with `caps` as the client capabilities.
fn meta_with(caps: Map<String, Value>) -> Map<String, Value> {
    let mut m = crate::client::modern_meta();
    m.insert(
        "io.modelcontextprotocol/clientCapabilities".into(),
        Value::Object(caps),
    );
    m
}

/// The `_meta` of a call (2026-07-28) declaring what it can answer and whether it takes a
/// task.
pub fn call_meta(input: Option<&CannedInput>, task: bool) -> Map<String, Value> {
    meta_with(client_capabilities(input, task))
}

/// The kinds of input `[input]` may answer (a method that is none of them never is).
pub const ANSWERABLE: [AskedKind; 3] = [
    AskedKind::Elicitation,
    AskedKind::Sampling,
    AskedKind::Roots,
];

/// The profile's `[input]`, as the results the server gets.
#[derive(Clone, Debug)]
pub struct CannedInput {
    elicitation: Option<Value>,
    /// The elicitation accepts with no canned `content`: each request's `requestedSchema`
    /// is filled (SEP-1034: its defaults first).
    fills_content: bool,
    sampling: Option<Value>,
    roots: Option<Value>,
    pub max_rounds: u32,
}

impl CannedInput {
    pub fn new(a: &InputAnswers) -> Self {
        let fills_content = a
            .elicitation
            .as_ref()
            .is_some_and(|e| e.action == ElicitAction::Accept && e.content.is_none());
        let elicitation = a.elicitation.as_ref().map(|e| {
            let action = match e.action {
                ElicitAction::Accept => "accept",
                ElicitAction::Decline => "decline",
                ElicitAction::Cancel => "cancel",
            };
            let mut r = json!({ "action": action });
            if let Some(c) = &e.content {
                r["content"] = super::mix::toml_to_json(c);
            }
            r
        });
        let sampling = a.sampling.as_ref().map(|text| {
            json!({
                "role": "assistant",
                "content": {"type": "text", "text": text},
                "model": "mcpload-canned",
                "stopReason": "endTurn",
            })
        });
        let roots = a.roots.as_ref().map(
            |uris| json!({ "roots": uris.iter().map(|u| json!({"uri": u})).collect::<Vec<_>>() }),
        );
        CannedInput {
            elicitation,
            fills_content,
            sampling,
            roots,
            max_rounds: a.max_rounds,
        }
    }

    /// The canned result for a request of `kind` with `params`, when the profile gives one:
    /// an elicitation accepted with no canned content carries content made from the
    /// request's `requestedSchema`.
    pub fn answer(&self, kind: AskedKind, params: Option<&Value>) -> Option<Value> {
        let canned = match kind {
            AskedKind::Elicitation => self.elicitation.as_ref(),
            AskedKind::Sampling => self.sampling.as_ref(),
            AskedKind::Roots => self.roots.as_ref(),
            AskedKind::Other => None,
        }?;
        let mut answer = canned.clone();
        if kind == AskedKind::Elicitation && self.fills_content {
            let schema = params.and_then(|p| p.get("requestedSchema"));
            answer["content"] =
                schema.map_or_else(|| json!({}), super::schema_args::elicited_content);
        }
        Some(answer)
    }

    /// The kinds it answers, for the correlator to tell an answered round from one nothing
    /// answers.
    pub fn cover(&self) -> InputCover {
        InputCover {
            elicitation: self.elicitation.is_some(),
            sampling: self.sampling.is_some(),
            roots: self.roots.is_some(),
        }
    }

    /// The `inputResponses` answering `requests` (key to `{method, params}`), or the first
    /// kind (or unknown method) with no canned answer.
    pub fn respond(&self, requests: &Map<String, Value>) -> Result<Map<String, Value>, AskedKind> {
        let mut out = Map::new();
        for (key, req) in requests {
            let method = req.get("method").and_then(Value::as_str).unwrap_or("");
            let kind = AskedKind::of_method(method);
            let answer = self.answer(kind, req.get("params")).ok_or(kind)?;
            out.insert(key.clone(), answer);
        }
        Ok(out)
    }
}

/// A task's status as a server reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
    /// Anything else (counted as working: not terminal).
    Other,
}

impl Status {
    /// The status named `s` (`Other` for a name that is none of the five).
    pub fn parse(s: &str) -> Status {
        match s {
            "working" => Status::Working,
            "input_required" => Status::InputRequired,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "cancelled" => Status::Cancelled,
            _ => Status::Other,
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// What a terminal `tasks/get` carries inline (2026-07-28).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inline {
    /// A `result`; whether it has `isError: true`.
    Result {
        is_error: bool,
    },
    Error,
}

/// A task as one answer shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskView {
    pub id: String,
    pub status: Status,
    pub poll_interval: Option<Duration>,
    pub ttl: Option<Duration>,
    pub inline: Option<Inline>,
}

/// What a `tools/call` answer asks of the client next.
#[derive(Debug)]
pub enum CallAnswer {
    /// The call's result; whether it has `isError: true`.
    Done {
        is_error: bool,
    },
    /// An `input_required` result: its `inputRequests` and `requestState`.
    Input {
        requests: Map<String, Value>,
        state: Option<Value>,
    },
    Task(TaskView),
}

#[derive(Deserialize)]
struct Fields {
    #[serde(rename = "resultType")]
    result_type: Option<String>,
    #[serde(rename = "isError", default)]
    is_error: bool,
    #[serde(rename = "inputRequests")]
    input_requests: Option<Map<String, Value>>,
    #[serde(rename = "requestState")]
    request_state: Option<Value>,
    task: Option<Value>,
    #[serde(rename = "taskId")]
    task_id: Option<String>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Reads a `tools/call` result (`modern`: 2026-07-28's `resultType`; else 2025-11-25's
/// `task` member).
pub fn read_call(result: &RawValue, modern: bool) -> CallAnswer {
    let Ok(f) = serde_json::from_str::<Fields>(result.get()) else {
        return CallAnswer::Done { is_error: false };
    };
    match (modern, f.result_type.as_deref()) {
        (true, Some("input_required")) => CallAnswer::Input {
            requests: f.input_requests.unwrap_or_default(),
            state: f.request_state,
        },
        (true, Some("task")) => match read_task_fields(f.task_id, &f.rest, true) {
            Some(t) => CallAnswer::Task(t),
            None => CallAnswer::Done { is_error: true },
        },
        (false, _) if f.task.is_some() => {
            let task = f.task.unwrap_or_default();
            let id = task
                .get("taskId")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match task
                .as_object()
                .and_then(|t| read_task_fields(id, t, false))
            {
                Some(t) => CallAnswer::Task(t),
                None => CallAnswer::Done { is_error: true },
            }
        }
        _ => CallAnswer::Done {
            is_error: f.is_error,
        },
    }
}

/// Reads a `tasks/get` result; `None` when it is no task.
pub fn read_task(result: &RawValue, modern: bool) -> Option<TaskView> {
    let f: Fields = serde_json::from_str(result.get()).ok()?;
    read_task_fields(f.task_id, &f.rest, modern)
}

fn read_task_fields(id: Option<String>, t: &Map<String, Value>, modern: bool) -> Option<TaskView> {
    let (ttl, poll) = if modern {
        ("ttlMs", "pollIntervalMs")
    } else {
        ("ttl", "pollInterval")
    };
    let ms = |k: &str| t.get(k).and_then(Value::as_u64).map(Duration::from_millis);
    let inline = if !modern {
        None
    } else if let Some(r) = t.get("result") {
        Some(Inline::Result {
            is_error: r.get("isError").and_then(Value::as_bool) == Some(true),
        })
    } else if t.contains_key("error") {
        Some(Inline::Error)
    } else {
        None
    };
    Some(TaskView {
        id: id?,
        status: Status::parse(t.get("status").and_then(Value::as_str)?),
        poll_interval: ms(poll),
        ttl: ms(ttl),
        inline,
    })
}

/// Whether a terminal status and the result it ended with agree: 2026-07-28 `completed`
/// carries a `result` and `failed` an `error`; 2025-11-25 `completed` ends with a result
/// that is no tool error, `failed` with an error or a tool error (`isError: true`).
pub fn result_agrees(status: Status, inline: Inline, modern: bool) -> bool {
    match (status, inline) {
        (Status::Cancelled, _) => true,
        (Status::Completed, Inline::Result { is_error }) => modern || !is_error,
        (Status::Completed, Inline::Error) => false,
        (Status::Failed, Inline::Result { is_error }) => !modern && is_error,
        (Status::Failed, Inline::Error) => true,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(v: Value) -> Box<RawValue> {
        RawValue::from_string(v.to_string()).unwrap()
    }

    #[test]
    fn reads_each_revisions_task_answer() {
        let legacy = raw(
            json!({"task": {"taskId": "t1", "status": "working", "ttl": 60000,
            "pollInterval": 100}}),
        );
        let CallAnswer::Task(t) = read_call(&legacy, false) else {
            panic!("a task")
        };
        assert_eq!((t.id.as_str(), t.status), ("t1", Status::Working));
        assert_eq!(t.poll_interval, Some(Duration::from_millis(100)));
        let modern = raw(
            json!({"resultType": "task", "taskId": "t2", "status": "working",
            "ttlMs": 5000, "pollIntervalMs": 50}),
        );
        let CallAnswer::Task(t) = read_call(&modern, true) else {
            panic!("a task")
        };
        assert_eq!(t.ttl, Some(Duration::from_secs(5)));
        let done = raw(
            json!({"resultType": "complete", "taskId": "t2", "status": "failed",
            "result": {"content": [], "isError": true}}),
        );
        let t = read_task(&done, true).unwrap();
        assert_eq!(t.inline, Some(Inline::Result { is_error: true }));
        assert!(!result_agrees(t.status, t.inline.unwrap(), true));
        assert!(result_agrees(t.status, t.inline.unwrap(), false));
    }

    #[test]
    fn an_input_request_without_a_canned_answer_names_its_kind() {
        let canned = CannedInput::new(&InputAnswers {
            elicitation: None,
            sampling: Some("hi".into()),
            roots: None,
            max_rounds: 3,
        });
        let asked: Map<String, Value> = serde_json::from_value(json!({
            "s": {"method": "sampling/createMessage", "params": {}},
        }))
        .unwrap();
        assert_eq!(
            canned.respond(&asked).unwrap()["s"]["content"]["text"],
            "hi"
        );
        let roots: Map<String, Value> =
            serde_json::from_value(json!({"r": {"method": "roots/list"}})).unwrap();
        assert_eq!(canned.respond(&roots).unwrap_err(), AskedKind::Roots);
    }

    #[test]
    fn a_retry_carries_the_responses_the_state_and_the_new_id() {
        let mut out = Vec::new();
        let first =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_input"}}"#;
        let mut responses = Map::new();
        responses.insert("k".into(), json!({"action": "decline"}));
        render_retry(&mut out, first, &Id::Num(9), responses, Some(json!("r1.x"))).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 9);
        assert_eq!(v["params"]["requestState"], "r1.x");
        assert_eq!(v["params"]["inputResponses"]["k"]["action"], "decline");
    }
}
