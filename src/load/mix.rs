//! The weighted mix: each operation compiled once for the agreed revision (params with the
//! era's `_meta`, `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers), then drawn by weight
//! and rendered into a request body with a fresh id. A tool whose `x-mcp-header`
//! annotations are invalid is never called: `tool = "*"` skips it, naming the reason.

use super::flow::{CannedInput, DEFAULT_TASK_TIMEOUT, FlowRules, OpFlow, SideOps, call_meta};
use super::schema_args;
use super::template::{CsvRow, Ctx, JsonTemplate, Rng, TextTemplate};
use crate::client::{
    ParamHeader, Revision, ServerInfo, TaskSupport, ToolInfo, header_value, modern_meta,
};
use crate::correlator::InputCover;
use crate::jsonrpc::{Id, encode_request_with};
use crate::profile::{InputAnswers, Method, Op, TaskMode};
use crate::protocol::headers::param_text;
use crate::transport::McpHeaders;
use http::{HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Rows of a CSV file, read once.
#[derive(Debug)]
pub struct CsvData {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl CsvData {
    pub fn read(path: &Path) -> Result<Self, String> {
        let mut r = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let header = r
            .headers()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .iter()
            .map(str::to_owned)
            .collect();
        let rows = r
            .records()
            .map(|rec| rec.map(|r| r.iter().map(str::to_owned).collect()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if rows.is_empty() {
            return Err(format!("{}: no rows", path.display()));
        }
        Ok(CsvData { header, rows })
    }
}

/// How an operation's params are made.
#[derive(Clone, Debug)]
enum Body {
    /// Any params object (with holes).
    Params(JsonTemplate),
    /// `resources/read`: the uri is rendered first, so that the `Mcp-Name` header and the
    /// body carry the same text; `meta` is the `_meta` object (the era's, a progress token).
    Uri {
        uri: TextTemplate,
        meta: Option<JsonTemplate>,
    },
}

/// One operation of the mix, ready to render.
#[derive(Clone, Debug)]
pub struct MixOp {
    method: Box<str>,
    /// Its number among the mix's operation names: what its requests count under.
    pub op: u16,
    /// Its requests carry their id as progress token (`params._meta.progressToken`).
    pub progress: bool,
    body: Body,
    headers: McpHeaders,
    /// Whether `Mcp-Name` must be set per request (2026-07-28 `resources/read`).
    name_per_request: bool,
    /// A call that may take more than one request: a task, input rounds.
    pub flow: Option<OpFlow>,
    /// The entry's own request timeout (`[[mix]] timeout`); `None`: the load's.
    pub timeout: Option<Duration>,
    /// The `Mcp-Param-*` headers read from each rendered request: those whose argument holds
    /// a template hole (`None` for every other operation).
    params_per_request: Option<Box<[Mirror]>>,
    csv: Option<Arc<CsvData>>,
}

/// A tool `tool = "*"` leaves out, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub tool: String,
    pub reason: String,
}

/// The whole mix with its cumulative weights.
#[derive(Clone, Debug)]
pub struct Mix {
    ops: Vec<MixOp>,
    cumulative: Vec<f64>,
    /// The operations' names (ops.csv's `op`), indexed by [`MixOp::op`]: entries that share
    /// a name count as one operation.
    names: Vec<String>,
    skipped: Vec<Skipped>,
    /// `tools/call` entries naming a tool the server's listing lacks (it listed some).
    unlisted: Vec<String>,
    /// The rules of tasks and input rounds, when an operation has either.
    flows: Option<Arc<FlowRules>>,
    /// The profile's `[input]`, as the results the server gets.
    input: Option<CannedInput>,
    /// The agreed revision is 2026-07-28.
    modern: bool,
    /// The tool each `tools/call` operation calls, by operation number.
    tools: Vec<(u16, String)>,
}

/// What a scenario iteration binds for every request it sends: its CSV row (by number; a
/// mix takes the request's sequence number) and its captured variables.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bound<'a> {
    pub row: Option<u64>,
    pub vars: Option<&'a Map<String, Value>>,
}

/// Per-worker state for rendering: sequence, randomness, scratch space.
pub struct Renderer {
    pub worker: u32,
    pub rng: Rng,
    scratch: Vec<u8>,
}

impl Renderer {
    pub fn new(worker: u32, seed: u64) -> Self {
        Renderer {
            worker,
            rng: Rng::new(seed ^ ((worker as u64 + 1) << 32)),
            scratch: Vec::with_capacity(256),
        }
    }
}

impl Mix {
    /// Compiles the profile's operations for the server's revision; `base` is the profile's
    /// folder (for CSV paths), `input` the profile's canned input answers.
    pub fn new(
        ops: &[Op],
        server: &ServerInfo,
        base: &Path,
        input: Option<&InputAnswers>,
    ) -> Result<Self, String> {
        let modern = server.revision.is_modern();
        let canned = input.map(CannedInput::new);
        let canned = canned.as_ref();
        let mut out = Vec::new();
        let mut weights = Vec::new();
        let mut names = OpNames::default();
        let mut skipped = Vec::new();
        let mut unlisted = Vec::new();
        let mut tools = Vec::new();
        for op in ops {
            let csv = match &op.csv {
                Some(p) => Some(Arc::new(CsvData::read(&base.join(p))?)),
                None => None,
            };
            if op.method == Method::ToolsCall && op.tool.as_deref() == Some("*") {
                let (valid, invalid): (Vec<_>, Vec<_>) =
                    server.tools.iter().partition(|t| t.invalid.is_none());
                skipped.extend(invalid.into_iter().map(|t| Skipped {
                    tool: t.name.clone(),
                    reason: t.invalid.clone().unwrap_or_default(),
                }));
                if valid.is_empty() {
                    return Err("tool = \"*\": the server lists no tools mcpload may call".into());
                }
                let share = op.weight as f64 / valid.len() as f64;
                for t in valid {
                    let args = schema_args::arguments_for(&t.input_schema);
                    let mut req = Request::of(op, Some(&t.name), Some(&args));
                    req.param_headers = &t.param_headers;
                    let flow = op_flow(op, Some(t), server, canned.is_some());
                    let (meta, task) = flow_params(op, flow, modern, canned);
                    req.meta = meta.as_ref();
                    req.task = task.as_ref();
                    out.push(compile(
                        req,
                        server.revision,
                        csv.clone(),
                        Source::Server,
                        // `tool = "*"`: each of the server's tools is an operation.
                        &t.name,
                        &mut names,
                    )?);
                    if let Some(o) = out.last_mut() {
                        o.flow = flow;
                        o.timeout = op.timeout;
                        tools.push((o.op, t.name.clone()));
                    }
                    weights.push(share);
                }
            } else {
                let args = op.args.clone().map(Value::Object);
                let mut req = Request::of(op, op.tool.as_deref(), args.as_ref());
                let listed = op.tool.as_deref().and_then(|name| server.tool(name));
                let flow = op_flow(op, listed, server, canned.is_some());
                let (meta, task) = flow_params(op, flow, modern, canned);
                req.meta = meta.as_ref();
                req.task = task.as_ref();
                if op.method == Method::ToolsCall
                    && listed.is_none()
                    && !server.tools.is_empty()
                    && let Some(name) = &op.tool
                    && !unlisted.contains(name)
                {
                    unlisted.push(name.clone());
                }
                if op.method == Method::ToolsCall
                    && let Some(t) = listed
                {
                    if let Some(why) = &t.invalid {
                        return Err(format!(
                            "tool {}: {why}; a tool with an invalid x-mcp-header annotation is \
                             never called",
                            t.name
                        ));
                    }
                    req.param_headers = &t.param_headers;
                }
                out.push(compile(
                    req,
                    server.revision,
                    csv,
                    Source::Profile,
                    op.name(),
                    &mut names,
                )?);
                if let Some(o) = out.last_mut() {
                    o.flow = flow;
                    o.timeout = op.timeout;
                    if op.method == Method::ToolsCall
                        && let Some(tool) = &op.tool
                    {
                        tools.push((o.op, tool.clone()));
                    }
                }
                weights.push(op.weight as f64);
            }
        }

        let mut acc = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                acc += w;
                acc
            })
            .collect();
        let flows = if out.iter().any(|o| o.flow.is_some()) {
            let side = if out.iter().any(|o| o.flow.is_some_and(|f| f.task)) {
                SideOps::number(&mut names)?
            } else {
                SideOps::default()
            };
            Some(Arc::new(FlowRules::new(
                server.revision,
                canned.cloned(),
                side,
            )))
        } else {
            None
        };
        Ok(Mix {
            ops: out,
            cumulative,
            names: names.into_vec(),
            skipped,
            unlisted,
            flows,
            input: canned.cloned(),
            modern,
            tools,
        })
    }

    /// The longest request timeout an entry of the mix sets for itself (`[[mix]] timeout`),
    /// if any sets one: a step's drain waits for it.
    pub fn longest_timeout(&self) -> Option<Duration> {
        self.ops.iter().filter_map(|o| o.timeout).max()
    }

    /// The tool each `tools/call` operation calls: (operation number, tool name).
    pub fn called_tools(&self) -> &[(u16, String)] {
        &self.tools
    }

    /// The rules of tasks and input rounds, when an operation has either.
    pub fn flows(&self) -> Option<&Arc<FlowRules>> {
        self.flows.as_ref()
    }

    /// 2026-07-28: the kinds of input the run answers, for the correlator to read results
    /// `input_required` by; `None` in the legacy era (it has no such result).
    pub fn input_cover(&self) -> Option<InputCover> {
        let canned = self.input.as_ref();
        self.modern
            .then(|| canned.map(CannedInput::cover).unwrap_or_default())
    }

    /// The profile's `[input]`, which also answers the requests a legacy server sends
    /// during a call.
    pub fn canned_input(&self) -> Option<&CannedInput> {
        self.input.as_ref()
    }

    /// Whether the server may send requests during a call that must be answered (the
    /// legacy era: 2026-07-28 asks with `input_required` results instead).
    pub fn answers_server_requests(&self) -> bool {
        !self.modern
    }

    /// The server's tools `tool = "*"` left out, with the reason.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Tools the mix calls by name that the server does not list (none when it listed
    /// nothing): a misspelt name, or a tool the server hides from this client.
    pub fn unlisted(&self) -> &[String] {
        &self.unlisted
    }

    pub fn ops(&self) -> &[MixOp] {
        &self.ops
    }

    /// Each operation with its weight.
    pub fn weighted(&self) -> impl Iterator<Item = (&MixOp, f64)> {
        let mut before = 0.0;
        self.ops.iter().zip(&self.cumulative).map(move |(op, c)| {
            let w = c - before;
            before = *c;
            (op, w)
        })
    }

    /// The operations' names, indexed by [`MixOp::op`].
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Draws an operation by weight.
    #[inline]
    pub fn pick(&self, rng: &mut Rng) -> &MixOp {
        if self.ops.len() == 1 {
            return &self.ops[0];
        }
        let total = *self.cumulative.last().expect("non-empty");
        let x = rng.unit() * total;
        let i = self.cumulative.partition_point(|c| *c <= x);
        &self.ops[i.min(self.ops.len() - 1)]
    }
}

impl MixOp {
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Appends the request with `id` (sequence number `seq`) to `out`; returns its headers.
    pub fn render(&self, out: &mut Vec<u8>, id: &Id, seq: u64, r: &mut Renderer) -> McpHeaders {
        self.render_bound(out, id, seq, r, Bound::default())
    }

    /// [`MixOp::render`] for a scenario iteration: its CSV row and its variables.
    pub fn render_bound(
        &self,
        out: &mut Vec<u8>,
        id: &Id,
        seq: u64,
        r: &mut Renderer,
        bound: Bound<'_>,
    ) -> McpHeaders {
        let row = self.csv.as_ref().map(|c| {
            let row = &c.rows[(bound.row.unwrap_or(seq) % c.rows.len() as u64) as usize];
            CsvRow {
                header: &c.header,
                row,
            }
        });
        let mut ctx = Ctx {
            id,
            seq,
            worker: r.worker,
            rng: &mut r.rng,
            csv: row.as_ref(),
            vars: bound.vars,
        };
        match &self.body {
            Body::Params(t) => {
                let start = out.len();
                encode_request_with(out, id, &self.method, |o| t.render(o, &mut ctx));
                let mut h = self.headers.clone();
                if let Some(params) = &self.params_per_request {
                    h.params = mirrored(&rendered_arguments(&out[start..]), params);
                }
                h
            }
            Body::Uri { uri, meta } => {
                r.scratch.clear();
                uri.render(&mut r.scratch, &mut ctx);
                let text = String::from_utf8_lossy(&r.scratch);
                encode_request_with(out, id, &self.method, |o| {
                    o.extend_from_slice(br#"{"uri":"#);
                    // Writing JSON into a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut *o, text.as_ref());
                    if let Some(m) = meta {
                        o.extend_from_slice(br#","_meta":"#);
                        m.render(o, &mut ctx);
                    }
                    o.push(b'}');
                });
                let mut h = self.headers.clone();
                if self.name_per_request {
                    h.name = Some(header_value(&text));
                }
                h
            }
        }
    }
}

/// Where an operation's names and arguments come from: the user's profile (templated) or the
/// server's tool list (taken as they are).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Profile,
    Server,
}

/// Operation names in order of first use; a name's index is its operation number.
#[derive(Default)]
pub struct OpNames(Vec<String>);

impl OpNames {
    /// Names numbered after `first` (which keep their numbers).
    pub fn continuing(first: &[String]) -> Self {
        OpNames(first.to_vec())
    }

    /// The number of operation `name`, given one on first use.
    pub fn number(&mut self, name: &str) -> Result<u16, String> {
        if let Some(i) = self.0.iter().position(|n| n == name) {
            return Ok(i as u16);
        }
        let i = u16::try_from(self.0.len())
            .map_err(|_| format!("more than {} operation names", u16::MAX))?;
        self.0.push(name.to_owned());
        Ok(i)
    }

    pub fn into_vec(self) -> Vec<String> {
        self.0
    }
}

/// One request as a profile describes it, for [`MixOp::compile`]: a mix entry or a call of a
/// scenario step.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub method: &'a str,
    pub tool: Option<&'a str>,
    pub prompt: Option<&'a str>,
    pub uri: Option<&'a str>,
    /// `tools/call` / `prompts/get` arguments.
    pub args: Option<&'a Value>,
    /// The whole params object, for other methods.
    pub params: Option<&'a Value>,
    /// `tools/call` (2026-07-28): the arguments the tool mirrors into `Mcp-Param-*`.
    pub param_headers: &'a [ParamHeader],
    /// 2026-07-28: the `_meta` to send (default: the era's, declaring no capabilities).
    pub meta: Option<&'a Map<String, Value>>,
    /// 2025-11-25: the `params.task` of a call made a task.
    pub task: Option<&'a Value>,
    /// Each request carries a progress token.
    pub progress: bool,
}

impl<'a> Request<'a> {
    fn of(op: &'a Op, tool: Option<&'a str>, args: Option<&'a Value>) -> Self {
        Request {
            method: op.method.as_str(),
            tool,
            prompt: op.prompt.as_deref(),
            uri: op.uri.as_ref().map(|u| u.0.as_str()),
            args,
            params: None,
            param_headers: &[],
            meta: None,
            task: None,
            progress: op.progress,
        }
    }
}

impl MixOp {
    /// Compiles one request for `revision`, counted under operation `name`.
    pub fn compile(
        req: Request<'_>,
        revision: Revision,
        csv: Option<Arc<CsvData>>,
        name: &str,
        names: &mut OpNames,
    ) -> Result<MixOp, String> {
        compile(req, revision, csv, Source::Profile, name, names)
    }
}

fn compile(
    req: Request<'_>,
    revision: Revision,
    csv: Option<Arc<CsvData>>,
    source: Source,
    op_name: &str,
    names: &mut OpNames,
) -> Result<MixOp, String> {
    let modern = revision.is_modern();
    let method = req.method;
    let mut params = match req.params {
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(format!("{method}: `params` must be a table")),
        None => Map::new(),
    };
    let tool = req.tool;
    let args = req.args.cloned();
    let name = match (method, req.params) {
        // Params written whole: the name `Mcp-Name` mirrors is theirs, and must be plain
        // text, since the header is made once.
        ("tools/call" | "prompts/get" | "resources/read", Some(_)) => {
            let field = if method == "resources/read" {
                "uri"
            } else {
                "name"
            };
            let named = params
                .get(field)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{method}: `params` needs a string `{field}`"))?;
            if named.contains("{{") {
                return Err(format!(
                    "{method}: `params.{field}` cannot hold placeholders (the Mcp-Name header \
                     mirrors it); give `tool`, `prompt` or `uri` instead"
                ));
            }
            Some(named.to_owned())
        }
        ("tools/call", None) => {
            let tool = tool.ok_or("tools/call needs `tool`")?;
            params.insert("name".into(), Value::from(tool));
            params.insert(
                "arguments".into(),
                args.unwrap_or_else(|| Value::Object(Map::new())),
            );
            Some(tool.to_owned())
        }
        ("prompts/get", None) => {
            let prompt = req.prompt.ok_or("prompts/get needs `prompt`")?;
            params.insert("name".into(), Value::from(prompt));
            if let Some(a) = args {
                params.insert("arguments".into(), a);
            }
            Some(prompt.to_owned())
        }
        _ => None,
    };
    if let Some(task) = req.task {
        params.insert("task".into(), task.clone());
    }
    let mut meta = modern.then(|| req.meta.cloned().unwrap_or_else(modern_meta));
    if req.progress {
        // The request's own id (unique in the run), written in as each request is rendered.
        meta.get_or_insert_default()
            .insert("progressToken".into(), Value::from(PROGRESS_TOKEN_MARK));
    }
    let with_token = |t: JsonTemplate| {
        if req.progress {
            t.with_request_id_at(PROGRESS_TOKEN_MARK)
        } else {
            t
        }
    };
    let mut headers = McpHeaders::default();
    let mut params_per_request = None;
    if modern {
        headers.method = Some(header_value(method));
        headers.name = name.as_deref().map(header_value);
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        // An argument written with a template hole is only known once rendered.
        let templated = |h: &ParamHeader| {
            source == Source::Profile
                && h.argument(arguments)
                    .is_some_and(|v| v.to_string().contains("{{"))
        };
        let mirrors = mirrors(req.param_headers);
        if req.param_headers.iter().any(templated) {
            params_per_request = Some(mirrors);
        } else {
            headers.params = mirrored(arguments, &mirrors);
        }
    }
    let label = match &name {
        Some(n) => format!("{method} {n}"),
        None => method.to_owned(),
    };
    let resource = method == "resources/read" && req.params.is_none();
    let body = if resource {
        let uri = req.uri.ok_or("resources/read needs `uri`")?;
        Body::Uri {
            uri: TextTemplate::new(uri)?,
            meta: meta.map(|m| with_token(JsonTemplate::literal(&Value::Object(m)))),
        }
    } else {
        if let Some(m) = meta {
            // The era's `_meta` and the token join any the params were written with.
            match params.get_mut("_meta") {
                Some(Value::Object(own)) => own.extend(m),
                _ => {
                    params.insert("_meta".into(), Value::Object(m));
                }
            }
        }
        let params = Value::Object(params);
        Body::Params(with_token(match source {
            Source::Profile => JsonTemplate::new(&params)?,
            Source::Server => JsonTemplate::literal(&params),
        }))
    };
    let uses_csv = match &body {
        Body::Params(t) => t.csv_columns().next().is_some(),
        Body::Uri { uri, .. } => uri.csv_columns().next().is_some(),
    };
    if uses_csv && csv.is_none() {
        return Err(format!(
            "{label}: `{{{{csv:…}}}}` needs `csv = \"file.csv\"` in the same [[mix]] entry"
        ));
    }
    if let Some(c) = &csv {
        let cols: Vec<&str> = match &body {
            Body::Params(t) => t.csv_columns().collect(),
            Body::Uri { uri, .. } => uri.csv_columns().collect(),
        };
        if let Some(bad) = cols.iter().find(|col| !c.header.iter().any(|h| h == *col)) {
            return Err(format!(
                "{label}: no CSV column {bad:?}; the file has {}",
                c.header.join(", ")
            ));
        }
    }
    Ok(MixOp {
        method: method.into(),
        op: names.number(op_name)?,
        progress: req.progress,
        body,
        flow: None,
        timeout: None,
        name_per_request: modern && resource,
        params_per_request,
        headers,
        csv,
    })
}

/// How a `tools/call` of the mix runs when it may take more than one request: as a task
/// (`task = true`, or `"auto"` and the server offers one for the tool), or, under
/// 2026-07-28 with `[input]` answers, as a call that may come back `input_required`.
fn op_flow(op: &Op, tool: Option<&ToolInfo>, server: &ServerInfo, input: bool) -> Option<OpFlow> {
    if op.method != Method::ToolsCall {
        return None;
    }
    let task = match op.task {
        TaskMode::Off => false,
        TaskMode::On => true,
        TaskMode::Auto if server.revision.is_modern() => server.offers_tasks(),
        TaskMode::Auto => tool.is_some_and(|t| t.task_support != TaskSupport::Forbidden),
    };
    (task || (input && server.revision.is_modern())).then_some(OpFlow {
        task,
        poll_interval: op.poll_interval,
        timeout: op.task_timeout.unwrap_or(DEFAULT_TASK_TIMEOUT),
        confirm: op.task_confirm,
    })
}

/// What a flow's call carries: 2026-07-28's `_meta` declaring the client capabilities it
/// answers (and the tasks extension for a task); 2025-11-25's `params.task` (with the
/// profile's `task_ttl`).
fn flow_params(
    op: &Op,
    flow: Option<OpFlow>,
    modern: bool,
    input: Option<&CannedInput>,
) -> (Option<Map<String, Value>>, Option<Value>) {
    let Some(f) = flow else {
        return (None, None);
    };
    if modern {
        return (Some(call_meta(input, f.task)), None);
    }
    let task = f.task.then(|| match op.task_ttl {
        Some(ttl) => serde_json::json!({ "ttl": ttl.as_millis() as u64 }),
        None => serde_json::json!({}),
    });
    (None, task)
}
/// What `params._meta.progressToken` holds until [`JsonTemplate::with_request_id_at`] makes
/// it the request's id: a string no profile writes.
const PROGRESS_TOKEN_MARK: &str = "\u{1}mcpload:progressToken\u{1}";

/// A `Mcp-Param-*` header's name, and the argument it mirrors.
type Mirror = (HeaderName, ParamHeader);

/// The headers of a tool's `x-mcp-header` annotations, named once (not per request).
fn mirrors(params: &[ParamHeader]) -> Box<[Mirror]> {
    params
        .iter()
        // The annotation was checked to be a token: the name is valid.
        .filter_map(|p| {
            Some((
                HeaderName::from_bytes(p.header_name().as_bytes()).ok()?,
                p.clone(),
            ))
        })
        .collect()
}

/// The `Mcp-Param-*` headers of `arguments` (an argument absent, null or not a primitive
/// sends none); `None` when there are none.
fn mirrored(arguments: &Value, mirrors: &[Mirror]) -> Option<Arc<[(HeaderName, HeaderValue)]>> {
    let headers: Vec<(HeaderName, HeaderValue)> = mirrors
        .iter()
        .filter_map(|(name, p)| {
            let text = param_text(p.argument(arguments)?)?;
            Some((name.clone(), header_value(&text)))
        })
        .collect();
    (!headers.is_empty()).then(|| headers.into())
}

/// The `params.arguments` of a rendered request (null when it has none): only they are
/// built into a tree, the rest of the request is skipped over.
fn rendered_arguments(request: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Request {
        params: Params,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(default)]
        arguments: Value,
    }
    serde_json::from_slice::<Request>(request).map_or(Value::Null, |r| r.params.arguments)
}

/// TOML arguments as JSON.
pub fn toml_to_json(t: &toml::Table) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}
