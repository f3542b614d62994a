//! The methods the target serves: a validated call with its arguments read ([`Call`]), the
//! tools (`echo`, `sleep`, `fail`, `tool_error`, `payload`, `progress`, and the job API's
//! `job_start`, `job_status`, `job_report`), the `mem://item/{n}` resources, the `greet`
//! prompt, `initialize` / `server/discover`, and their results.

use super::job_api::{ITEMS_MAX, JobStore, REQUEST_KEY_MAX};
use super::mcp::Params;
use super::wire::{Outcome, Progress};
use crate::jsonrpc::{ErrorObject, codes};
use crate::protocol::Revision;
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
    ResourcesList,
    TemplatesList,
    Read(String),
    PromptsList,
    GetPrompt(String),
    /// Validation of the arguments failed: answered with this error.
    Invalid(ErrorObject),
}

/// A request ready to run.
pub(crate) struct Prepared {
    pub call: Call,
    pub version: Revision,
    pub progress: Option<Box<RawValue>>,
}

const SLEEP_MAX_MS: u64 = 600_000;
const PAYLOAD_MAX: usize = 64 << 20;
const PROGRESS_STEPS_MAX: u64 = 1_000;
const RESOURCE_NOT_FOUND: i64 = -32002;
/// `echo`'s `message` when the call leaves it out, so that `{}` is a valid call of the first
/// listed tool (the header conformance check calls it so).
const ECHO_DEFAULT: &str = "hello";
static ECHO_DEFAULT_JSON: LazyLock<Box<RawValue>> =
    LazyLock::new(|| serde_json::value::to_raw_value(ECHO_DEFAULT).expect("a string serialises"));

pub(crate) fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject {
        code: codes::INVALID_PARAMS,
        message: message.into(),
        data: None,
    }
}

/// Runs a call (`supported`: the versions served, for `server/discover`; `jobs`: the job
/// API's store). Progress notifications go to `progress` when the request asked for them.
pub(crate) async fn execute(
    prep: Prepared,
    supported: &Value,
    jobs: &JobStore,
    progress: Option<Progress<'_>>,
) -> Outcome {
    let modern = prep.version.is_modern();
    let ok = |v: Value, cacheable: bool| Outcome::Result(finish(v, modern, cacheable));
    match prep.call {
        Call::Initialize(v) => Outcome::Result(finish(
            json!({
                "protocolVersion": v.as_str(),
                "capabilities": capabilities(),
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            }),
            false,
            false,
        )),
        Call::Discover => {
            let mut r = json!({
                "supportedVersions": supported,
                "capabilities": capabilities(),
                "instructions": INSTRUCTIONS,
                "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
            });
            cacheable_fields(&mut r);
            Outcome::Result(finish(r, true, false))
        }
        Call::Ping => Outcome::Result(b"{}".to_vec()),
        Call::ToolsList => Outcome::Result(
            if modern { &TOOLS_LIST.1 } else { &TOOLS_LIST.0 }
                .as_bytes()
                .to_vec(),
        ),
        Call::Echo(text) => {
            let mut out = Vec::with_capacity(64 + text.get().len());
            out.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
            out.extend_from_slice(text.get().as_bytes());
            out.extend_from_slice(b"}]");
            if modern {
                out.extend_from_slice(br#","resultType":"complete""#);
            }
            out.push(b'}');
            Outcome::Result(out)
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
            for step in 1..=steps {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if let (Some(progress), Some(token)) = (progress, &prep.progress) {
                    let note = json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": token,
                            "progress": step,
                            "total": steps,
                            "message": format!("step {step} of {steps}"),
                        },
                    });
                    progress
                        .send(serde_json::to_vec(&note).unwrap_or_default())
                        .await;
                }
            }
            ok(text_result(&format!("done: {steps} steps"), false), false)
        }
        Call::JobStart { items, request_key } => structured(jobs.start(items, request_key), modern),
        Call::JobStatus(id) => structured(jobs.status(&id), modern),
        Call::JobReport(id) => structured(jobs.report(&id), modern),
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
        Call::Invalid(e) => Outcome::Error(e),
    }
}

/// Reads `tools/call` params into a call (argument errors become [`Call::Invalid`]).
pub(crate) fn tool_call(p: &Params) -> Call {
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
    }
    let Some(name) = p.name.as_deref() else {
        return Call::Invalid(invalid_params("tools/call needs `name`"));
    };
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
        "echo" => match args.message {
            None => Ok(Call::Echo(ECHO_DEFAULT_JSON.to_owned())),
            Some(m) if m.get().starts_with('"') => Ok(Call::Echo(m.to_owned())),
            Some(_) => Err(invalid_params(
                "Invalid arguments for tool echo: `message` must be a string",
            )),
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
payload and progress tools, a job API (job_start, job_status, job_report), mem://item/{n} \
resources and a greet prompt.";

fn server_info() -> Value {
    json!({"name": "mcpload-serve", "version": env!("CARGO_PKG_VERSION")})
}

fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}, "resources": {}, "prompts": {}})
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

/// The `tools/list` result, serialised once: (legacy, 2026-07-28).
static TOOLS_LIST: LazyLock<(String, String)> = LazyLock::new(|| {
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
    let tools = json!([
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
    ]);
    let legacy = finish(json!({ "tools": tools }), false, true);
    let modern = finish(json!({ "tools": tools }), true, true);
    (
        String::from_utf8(legacy).unwrap_or_default(),
        String::from_utf8(modern).unwrap_or_default(),
    )
});
