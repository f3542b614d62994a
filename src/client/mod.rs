//! The MCP layer over a transport: protocol revisions and their two eras (legacy
//! `initialize` + sessions; 2026-07-28 `_meta` + headers, no session), era detection,
//! connecting (handshake or discovery, then `tools/list`), and per-era request building.
//!
//! The engine's way in:
//! ```no_run
//! # async fn f() -> Result<(), mcpload::client::McpError> {
//! use mcpload::client::{ConnectOptions, Connector, Endpoint};
//! use mcpload::transport::Transport;
//! let auth = mcpload::client::split_header("Authorization: Bearer ${TOKEN}").unwrap();
//! let target = Endpoint::http("http://127.0.0.1:8080/mcp", vec![auth]);
//! let connector = Connector::new(target, ConnectOptions::default())?;
//! let mut conn = connector.connect().await?;      // era agreed, tools listed
//! let op = conn.server.operation("tools/call", Some(&serde_json::json!({"name": "echo", "arguments": {"message": "hi"}})))?;
//! conn.transport.send(op.request(1.into()));       // pre-serialised; one memcpy per send
//! # Ok(()) }
//! ```

mod connect;
mod ops;

pub use connect::{Connected, Connector, List, list_all};
pub use ops::{Operation, client_info, header_value, modern_meta};

pub use crate::protocol::headers::ParamHeader;
pub use crate::protocol::{Era, ProtocolChoice, Revision};
use crate::transport::{
    AnyTransport, Credentials, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_ANSWER_MEMORY, StdioOptions,
    TlsOptions, TransportError,
};
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// What to connect to.
#[derive(Clone)]
pub enum Endpoint {
    /// A Streamable HTTP endpoint. `headers` are `(name, value)` pairs as written; `${VAR}` in
    /// a value is replaced by the environment variable when connecting (secrets stay out of
    /// profiles and logs).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// A server run as a child process.
    Stdio(StdioOptions),
}

impl fmt::Debug for Endpoint {
    /// Header values may be secrets: only their names are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Http { url, headers } => {
                let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
                f.debug_struct("Http")
                    .field("url", url)
                    .field("headers", &names)
                    .finish()
            }
            Endpoint::Stdio(o) => f.debug_tuple("Stdio").field(o).finish(),
        }
    }
}

impl Endpoint {
    pub fn http(url: impl Into<String>, headers: Vec<(String, String)>) -> Self {
        Endpoint::Http {
            url: url.into(),
            headers,
        }
    }

    /// A stdio target from a command line (`"node server.js --flag"`).
    pub fn stdio(command_line: &str) -> Result<Self, McpError> {
        Ok(Endpoint::Stdio(StdioOptions::from_command_line(
            command_line,
        )?))
    }

    /// Where the target is, for reports (no header values).
    pub fn describe(&self) -> String {
        match self {
            Endpoint::Http { url, .. } => url.clone(),
            Endpoint::Stdio(o) => {
                let mut words = vec![o.program.clone()];
                words.extend(o.args.iter().cloned());
                shell_words::join(words)
            }
        }
    }
}

/// Which HTTP transport to speak (`--transport`, profile `target.transport`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum TransportChoice {
    /// Streamable HTTP; the legacy HTTP+SSE transport when every way of agreeing on a
    /// revision is refused and a GET opens an SSE stream whose first event is `endpoint`.
    #[default]
    Auto,
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
}

impl std::str::FromStr for TransportChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(TransportChoice::Auto),
            "streamable-http" => Ok(TransportChoice::StreamableHttp),
            "sse" => Ok(TransportChoice::Sse),
            _ => Err(format!(
                "unknown transport {s:?}: use auto, streamable-http or sse"
            )),
        }
    }
}

/// The transport a connection speaks (`settings.transport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
    Stdio,
}

impl TransportKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::StreamableHttp => "streamable-http",
            TransportKind::Sse => "sse",
            TransportKind::Stdio => "stdio",
        }
    }

    /// What a transport is.
    pub fn of(t: &AnyTransport) -> Self {
        match t {
            AnyTransport::Http(_) => TransportKind::StreamableHttp,
            AnyTransport::LegacySse(_) => TransportKind::Sse,
            AnyTransport::Stdio(_) | AnyTransport::Fleet(_) => TransportKind::Stdio,
        }
    }
}

/// How to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    pub protocol: ProtocolChoice,
    /// HTTP: Streamable HTTP, the legacy HTTP+SSE transport, or either as the server speaks.
    pub transport: TransportChoice,
    /// HTTP: the most connections open to the target at once, over every transport the
    /// connector makes. Everything sent to the target goes over them: the handshake, the
    /// load, cancel notifications, a legacy session's re-initialization and DELETE, probes.
    /// Each connection carries one request at a time (HTTP/1.1; HTTP/2 is not spoken), and a
    /// request finding its transport's connections all busy waits for one: size it to the
    /// requests in flight.
    pub pool_size: usize,
    /// How many transports share `pool_size` (a run: one per worker). The connector splits
    /// it evenly: the k-th transport it makes gets share k mod `transports`, one connection
    /// at least, so keep `transports` at most `pool_size`.
    pub transports: usize,
    /// Largest JSON text accepted (body, SSE event, stdio line).
    pub max_message_bytes: usize,
    /// HTTP: the most bytes the answers being read may hold at once, over every transport
    /// the connector makes (docs/metrics.md, "answer bytes in flight").
    pub max_answer_memory: usize,
    /// Bound on each handshake / discovery / listing step.
    pub handshake_timeout: Duration,
    /// HTTP: bound on opening each connection (TCP, and TLS for `https://`), the
    /// handshake's and the load's alike. A connect that takes longer fails: the handshake
    /// with an error, a request of the load as `transport_errors`.
    pub connect_timeout: Duration,
    /// Bound on every HTTP exchange of the load (`None`: unbounded; the engine's request
    /// timeouts and cancellation decide).
    pub exchange_timeout: Option<Duration>,
    /// Run `tools/list` (all pages) while connecting.
    pub list_tools: bool,
    /// HTTP: every 400 to a request that carried the session id says the session is gone
    /// (servers known to answer so); otherwise only a 400 whose JSON-RPC error says so.
    pub session_lost_on_400: bool,
    /// What `initialize` declares the client can do (legacy eras): the input kinds the
    /// profile's `[input]` answers server requests with.
    pub client_capabilities: serde_json::Map<String, serde_json::Value>,
    /// HTTP: the bearer credentials every request carries (a static token, or OAuth).
    pub auth: Option<Credentials>,
    /// HTTP: how `https://` servers are trusted, and the client's certificate.
    pub tls: TlsOptions,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            protocol: ProtocolChoice::Auto,
            transport: TransportChoice::Auto,
            pool_size: 64,
            transports: 1,
            max_message_bytes: 16 << 20,
            max_answer_memory: DEFAULT_MAX_ANSWER_MEMORY,
            handshake_timeout: Duration::from_secs(15),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            exchange_timeout: None,
            list_tools: true,
            session_lost_on_400: false,
            client_capabilities: serde_json::Map::new(),
            auth: None,
            tls: TlsOptions::default(),
        }
    }
}

/// Why connecting or talking MCP failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("invalid target: {0}")]
    Target(String),
    #[error("header {header}: environment variable {var} is not set")]
    MissingEnv { header: String, var: String },
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{step}: HTTP {status}{detail}")]
    Status {
        step: &'static str,
        status: u16,
        detail: String,
    },
    #[error("{step}: the server answered error {code}: {message}")]
    Rpc {
        step: &'static str,
        code: i64,
        message: String,
    },
    #[error("{step}: no answer within {timeout:?}")]
    NoAnswer {
        step: &'static str,
        timeout: Duration,
    },
    #[error("{step}: {detail}")]
    Protocol { step: &'static str, detail: String },
    /// The target wants authorization that could not be had (no credentials, a token
    /// refused, the token endpoint refusing the client): a configuration problem.
    #[error("authorization: {0}")]
    Auth(String),
}

/// A tool the server lists.
#[derive(Clone, Debug, Serialize)]
pub struct ToolInfo {
    pub name: String,
    /// The tool's `inputSchema`.
    pub input_schema: Value,
    /// `inputSchema.required`.
    pub required: Vec<String>,
    /// 2026-07-28: the arguments mirrored into `Mcp-Param-*` headers (`x-mcp-header`).
    pub param_headers: Vec<ParamHeader>,
    /// 2026-07-28: why the tool's `x-mcp-header` annotations are invalid; such a tool is
    /// never called.
    pub invalid: Option<String>,
    /// 2025-11-25: `execution.taskSupport` (`forbidden` when absent).
    pub task_support: TaskSupport,
    /// 2025-06-18 on: the `outputSchema` its results' `structuredContent` must conform to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// Whether a tool may run as a task (2025-11-25 `execution.taskSupport`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    #[default]
    Forbidden,
    Optional,
    Required,
}

impl TaskSupport {
    /// Reads a tool listing's `execution.taskSupport`.
    pub fn of(tool: &Value) -> TaskSupport {
        match tool
            .pointer("/execution/taskSupport")
            .and_then(Value::as_str)
        {
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }
}

impl ToolInfo {
    /// A listed tool; under 2026-07-28 its `x-mcp-header` annotations are read.
    pub fn new(name: String, input_schema: Value, revision: Revision) -> ToolInfo {
        let required = connect::strings(input_schema.get("required"));
        let (param_headers, invalid) = if revision.is_modern() {
            match crate::protocol::headers::param_headers(&input_schema) {
                Ok(h) => (h, None),
                Err(why) => (Vec::new(), Some(why)),
            }
        } else {
            (Vec::new(), None)
        };
        ToolInfo {
            name,
            input_schema,
            required,
            param_headers,
            invalid,
            task_support: TaskSupport::Forbidden,
            output_schema: None,
        }
    }
}

impl ToolInfo {
    /// A tool as a `tools/list` page lists it (`None` without a name): its input schema
    /// (`{}` when absent), `execution.taskSupport` and `outputSchema`.
    pub fn of_listing(tool: &Value, revision: Revision) -> Option<ToolInfo> {
        let name = tool.get("name").and_then(Value::as_str)?;
        let input_schema = tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
        let mut info = ToolInfo::new(name.to_owned(), input_schema, revision);
        info.task_support = TaskSupport::of(tool);
        info.output_schema = tool.get("outputSchema").cloned();
        Some(info)
    }
}

/// One request of the revision agreement and what it answered (summary.json keeps them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// The request: `server/discover`, `initialize 2025-11-25`, `tools/list 2026-07-28`.
    pub sent: String,
    /// Its answer, in words.
    pub answered: String,
}

impl Attempt {
    fn new(sent: impl Into<String>, answered: impl Into<String>) -> Attempt {
        Attempt {
            sent: sent.into(),
            answered: answered.into(),
        }
    }
}

/// What connecting learnt about the server.
#[derive(Clone, Debug, Serialize)]
pub struct ServerInfo {
    pub era: Era,
    /// The revision agreed (or discovered) and used for every request.
    pub revision: Revision,
    /// How the era was found, in words (for reports).
    pub detection: String,
    /// The requests sent to agree on the revision, in order, with their answers.
    pub negotiation: Vec<Attempt>,
    /// `serverInfo` (name, version), when the server gave it.
    pub server_info: Value,
    pub capabilities: Value,
    /// `supportedVersions` from `server/discover`, when it answered.
    pub supported_versions: Vec<String>,
    /// A legacy HTTP session id was issued (a legacy HTTP+SSE session is always one).
    pub session: bool,
    /// The transport spoken.
    pub transport: TransportKind,
    pub tools: Vec<ToolInfo>,
}

impl ServerInfo {
    /// A request of this server's era (see [`Operation::new`]).
    pub fn operation(&self, method: &str, params: Option<&Value>) -> Result<Operation, McpError> {
        Operation::new(self.revision, method, params)
    }

    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Whether the server runs `tools/call` as tasks: 2025-11-25's `tasks.requests.tools.call`
    /// capability, or 2026-07-28's tasks extension.
    pub fn offers_tasks(&self) -> bool {
        let c = &self.capabilities;
        if self.revision.is_modern() {
            c.pointer("/extensions")
                .and_then(|e| e.get(crate::protocol::TASKS_EXTENSION))
                .is_some_and(Value::is_object)
        } else {
            c.pointer("/tasks/requests/tools/call")
                .is_some_and(Value::is_object)
        }
    }
}

/// Splits a `Name: value` header line (`-H`) at its first colon into a trimmed
/// `(name, value)`; the value stays as written (`${VAR}` expands when connecting).
pub fn split_header(line: &str) -> Result<(String, String), String> {
    let (name, value) = line
        .split_once(':')
        .ok_or_else(|| "write \"Name: value\"".to_owned())?;
    let name = name.trim();
    if name.is_empty() {
        return Err("the header name is empty".into());
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

/// Replaces every `${VAR}` with `lookup(VAR)`; `$$` is a literal `$`. Returns the name of the
/// first variable not found.
pub fn expand_env(s: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{')
            && let Some(end) = body.find('}')
        {
            let var = &body[..end];
            out.push_str(&lookup(var).ok_or_else(|| var.to_owned())?);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_expansion_replaces_and_names_what_is_missing() {
        let look = |v: &str| (v == "TOKEN").then(|| "s3cret".to_string());
        assert_eq!(
            expand_env("Bearer ${TOKEN}", look).as_deref(),
            Ok("Bearer s3cret")
        );
        assert_eq!(expand_env("$$5 $x ${", look).as_deref(), Ok("$5 $x ${"));
        assert_eq!(expand_env("${NOPE}", look), Err("NOPE".to_string()));
    }

    #[test]
    fn header_lines_split_at_the_first_colon() {
        let (n, v) = split_header("X-Trace: a:b").unwrap();
        assert_eq!((n.as_str(), v.as_str()), ("X-Trace", "a:b"));
        assert!(split_header("nocolon").is_err());
        assert!(split_header(" : v").is_err());
        let (_, v) = split_header("Authorization: Bearer ${TOKEN}").unwrap();
        assert_eq!(v, "Bearer ${TOKEN}", "expansion waits for the connection");
    }
}
