//! The MCP layer of the target: protocol versions and eras, reading one incoming message,
//! era routing, the 2026-07-28 validation ladder (`_meta`, header agreement, version), and
//! the choice of method. Transport-free: the handler calls in here for HTTP and stdio alike.

use super::config::{BatchPolicy, ServeConfig};
use super::input::Kind;
use super::methods::{Call, Prepared, prompt_call, tool_call};
use super::param_tools;
use super::wire::invalid_params;
use crate::jsonrpc::{ErrorObject, Id, codes};
use crate::protocol::codes as mcp_codes;
use crate::protocol::headers::{self, NameParam};
use crate::protocol::{Revision, TASKS_EXTENSION};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::borrow::Cow;

/// The revision a legacy request is served at before any `initialize` agreed one.
const ASSUMED: Revision = Revision::V2025_03_26;

/// One incoming JSON value as JSON-RPC sees it.
pub(crate) enum Msg<'a> {
    /// A request: its id exactly as sent, and the rest.
    Request(&'a RawValue, Req<'a>),
    Notification(Req<'a>),
    /// A response or error object from the client (the target never asks anything): ignored.
    ClientResponse,
    /// Not a JSON-RPC message (answered with an error whose id is null).
    Invalid(&'static str),
}

/// A request or a notification, borrowed from the body.
pub(crate) struct Req<'a> {
    pub method: Cow<'a, str>,
    pub params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Keeps a member that is present with the value `null` apart from an absent one.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Reads one JSON value (a whole body, a line, or one batch member).
pub(crate) fn classify(raw: &RawValue) -> Msg<'_> {
    if !raw.get().starts_with('{') {
        return Msg::Invalid("not a JSON object");
    }
    let Ok(env) = serde_json::from_str::<Envelope>(raw.get()) else {
        return Msg::Invalid("malformed JSON-RPC object");
    };
    if env.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return Msg::Invalid("`jsonrpc` must be \"2.0\"");
    }
    let Some(method) = env.method else {
        return if env.id.is_some() && (env.result.is_some() || env.error.is_some()) {
            Msg::ClientResponse
        } else {
            Msg::Invalid("no `method`")
        };
    };
    let Some(id) = env.id else {
        return Msg::Notification(Req {
            method,
            params: env.params,
        });
    };
    if serde_json::from_str::<Id>(id.get()).is_err() {
        return Msg::Invalid("the id must be a string or an integer");
    }
    Msg::Request(
        id,
        Req {
            method,
            params: env.params,
        },
    )
}

/// The members of `params` that routing and the methods need.
#[derive(Default, Deserialize)]
pub(crate) struct Params<'a> {
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub uri: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub arguments: Option<&'a RawValue>,
    #[serde(rename = "protocolVersion", default, borrow)]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "requestId", default, borrow)]
    request_id: Option<&'a RawValue>,
    /// 2025-11-25: a task-augmented request's `TaskMetadata`.
    #[serde(default, borrow)]
    pub task: Option<&'a RawValue>,
    #[serde(rename = "taskId", default, borrow)]
    pub task_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub cursor: Option<Cow<'a, str>>,
    /// 2026-07-28: a retry's answers to the input requests.
    #[serde(rename = "inputResponses", default, borrow)]
    pub input_responses: Option<&'a RawValue>,
    /// 2026-07-28: a retry's echoed `requestState`.
    #[serde(rename = "requestState", default, borrow)]
    pub request_state: Option<Cow<'a, str>>,
}

/// What a 2026-07-28 request's `io.modelcontextprotocol/clientCapabilities` declares, as far
/// as the target's methods depend on it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClientCaps {
    pub tasks: bool,
    pub elicitation: bool,
    pub sampling: bool,
    pub roots: bool,
}

/// The members of a `ClientCapabilities` object that [`ClientCaps`] reads, kept raw: read
/// on every 2026-07-28 request, so borrowed like [`Params`], never built into a `Value`.
#[derive(Default, Deserialize)]
struct DeclaredCaps<'a> {
    #[serde(default, borrow)]
    extensions: Option<&'a RawValue>,
    #[serde(default, borrow)]
    elicitation: Option<&'a RawValue>,
    #[serde(default, borrow)]
    sampling: Option<&'a RawValue>,
    #[serde(default, borrow)]
    roots: Option<&'a RawValue>,
}

/// The member of `extensions` named [`crate::protocol::TASKS_EXTENSION`].
#[derive(Default, Deserialize)]
struct DeclaredExtensions<'a> {
    #[serde(rename = "io.modelcontextprotocol/tasks", default, borrow)]
    tasks: Option<&'a RawValue>,
}

/// A capability is declared when its member is an object.
fn declared(member: Option<&RawValue>) -> bool {
    member.is_some_and(|raw| raw.get().starts_with('{'))
}

impl ClientCaps {
    fn read(raw: Option<&RawValue>) -> ClientCaps {
        let caps: DeclaredCaps = raw
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or_default();
        let extensions: DeclaredExtensions = caps
            .extensions
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or_default();
        ClientCaps {
            tasks: declared(extensions.tasks),
            elicitation: declared(caps.elicitation),
            sampling: declared(caps.sampling),
            roots: declared(caps.roots),
        }
    }

    pub(crate) fn has(&self, kind: Kind) -> bool {
        match kind {
            Kind::Elicitation => self.elicitation,
            Kind::Sampling => self.sampling,
            Kind::Roots => self.roots,
        }
    }

    /// Under 2026-07-28: -32021 naming `required` (a `ClientCapabilities` object), HTTP 400.
    pub(crate) fn missing(required: Value) -> Early {
        let mut e = Early::new(
            mcp_codes::MISSING_CLIENT_CAPABILITY,
            "Missing required client capability",
            400,
        );
        e.error.data = Some(json!({ "requiredCapabilities": required }));
        e
    }

    /// The `requiredCapabilities` of the tasks extension.
    pub(crate) fn tasks_required() -> Value {
        json!({"extensions": {TASKS_EXTENSION: {}}})
    }
}

#[derive(Default, Deserialize)]
struct Meta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default, borrow)]
    version: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", default, borrow)]
    capabilities: Option<&'a RawValue>,
    #[serde(rename = "progressToken", default, borrow)]
    progress_token: Option<&'a RawValue>,
}

/// `params` and its `_meta`, read once; `None` members when absent or of the wrong shape.
pub(crate) struct Parsed<'a> {
    params: Option<Params<'a>>,
    meta: Option<Meta<'a>>,
    params_ok: bool,
}

impl<'a> Parsed<'a> {
    pub(crate) fn new(req: &Req<'a>) -> Parsed<'a> {
        let params = match req.params {
            None => Some(Params::default()),
            Some(raw) => serde_json::from_str::<Params>(raw.get()).ok(),
        };
        let params_ok = params.is_some();
        let meta = params
            .as_ref()
            .and_then(|p| p.meta)
            .and_then(|m| serde_json::from_str::<Meta>(m.get()).ok());
        Parsed {
            params,
            meta,
            params_ok,
        }
    }

    /// The protocol version a 2026-07-28 request names in `_meta` (as raw JSON).
    pub(crate) fn meta_version(&self) -> Option<&'a RawValue> {
        self.meta.as_ref()?.version
    }

    pub(crate) fn progress_token(&self) -> Option<&'a RawValue> {
        self.meta.as_ref()?.progress_token
    }

    /// `requestId` of a `notifications/cancelled`.
    pub(crate) fn cancelled_request(&self) -> Option<&'a RawValue> {
        self.params.as_ref()?.request_id
    }
}

/// The name a request is counted under in `/stats` `operations`: the tool's name for
/// `tools/call`, the URI for `resources/read`, the prompt's name for `prompts/get` (the
/// method when that member is missing), else the method.
pub(crate) fn operation_name<'b>(req: &'b Req, parsed: &'b Parsed) -> &'b str {
    let p = parsed.params.as_ref();
    let member = match NameParam::of(&req.method) {
        Some(NameParam::Name) => p.and_then(|p| p.name.as_deref()),
        Some(NameParam::Uri) => p.and_then(|p| p.uri.as_deref()),
        // One task is no operation of its own: counted under its method.
        Some(NameParam::TaskId) | None => None,
    };
    member.unwrap_or(&req.method)
}

/// HTTP headers of a single-request POST, checked against the body under 2026-07-28.
#[derive(Clone, Copy, Default)]
pub(crate) struct Headers<'h> {
    pub version: Option<&'h str>,
    pub method: Option<&'h str>,
    pub name: Option<&'h str>,
    /// The `Mcp-Param-*` headers, `(name, value)`.
    pub params: &'h [(&'h str, &'h str)],
}

/// How a request is served: in which era, at which revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The `initialize` era at the negotiated (or assumed) revision.
    Legacy(Revision),
    /// 2026-07-28: the version comes from each request's `_meta`.
    Modern,
}

/// An error answered before any method runs, with its HTTP status.
#[derive(Debug)]
pub(crate) struct Early {
    pub error: ErrorObject,
    pub status: u16,
}

impl Early {
    pub(crate) fn new(code: i64, message: impl Into<String>, status: u16) -> Early {
        Early {
            error: ErrorObject {
                code,
                message: message.into(),
                data: None,
            },
            status,
        }
    }
}

/// The protocol half of the target: which versions it serves, and how it answers.
pub(crate) struct Protocol {
    /// Newest first.
    served: Vec<Revision>,
    batches: BatchPolicy,
    supported_json: Value,
    /// `server/discover` is implemented.
    discover: bool,
    /// The `x-mcp-header` tools are listed and their headers checked.
    header_tools: bool,
    /// Calls are taken to declare every input capability (`input_unchecked`).
    input_unchecked: bool,
}

impl Protocol {
    pub(super) fn new(cfg: &ServeConfig) -> Result<Protocol, super::config::ConfigError> {
        let served = cfg.served_versions()?;
        let supported_json = json!(served.iter().map(|v| v.as_str()).collect::<Vec<_>>());
        Ok(Protocol {
            served,
            batches: cfg.batches,
            supported_json,
            discover: cfg.discover,
            header_tools: cfg.header_tools,
            input_unchecked: cfg.input_unchecked,
        })
    }

    /// The versions served, newest first, as JSON.
    pub(super) fn supported(&self) -> &Value {
        &self.supported_json
    }

    pub(super) fn serves(&self, v: Revision) -> bool {
        self.served.contains(&v)
    }

    fn newest_legacy(&self) -> Option<Revision> {
        self.served.iter().copied().find(|v| !v.is_modern())
    }

    /// -32022 naming what is served.
    pub(super) fn unsupported(&self, requested: &str) -> Early {
        let mut e = Early::new(
            mcp_codes::UNSUPPORTED_VERSION,
            format!("Unsupported protocol version: {requested}"),
            400,
        );
        e.error.data = Some(json!({"supported": self.supported_json, "requested": requested}));
        e
    }

    /// Whether a batch is served on this route.
    pub(super) fn batch_allowed(&self, route: Route) -> bool {
        match self.batches {
            BatchPolicy::Accept => true,
            BatchPolicy::Reject => false,
            BatchPolicy::Auto => route == Route::Legacy(Revision::V2025_03_26),
        }
    }

    /// The error of a refused batch (HTTP 400, id null).
    pub(super) fn batch_refusal(&self, route: Route) -> ErrorObject {
        let at = match route {
            Route::Legacy(v) => v.as_str(),
            Route::Modern => Revision::V2026_07_28.as_str(),
        };
        ErrorObject {
            code: codes::INVALID_REQUEST,
            message: format!("JSON-RPC batches are not accepted under protocol version {at}"),
            data: None,
        }
    }

    /// Chooses the era of an HTTP POST. `header` is `MCP-Protocol-Version`, `session` the
    /// version of a known legacy session; `initialize` and `modern_body` describe a single
    /// request body (an `initialize`; a request naming a version in `_meta`).
    pub(super) fn route_http(
        &self,
        header: Option<&str>,
        session: Option<Revision>,
        initialize: bool,
        modern_body: bool,
    ) -> Result<Route, Early> {
        if let Some(h) = header {
            return match Revision::parse(h).filter(|v| self.serves(*v)) {
                Some(v) if v.is_modern() => Ok(Route::Modern),
                Some(v) if !initialize && session.is_some_and(|s| s != v) => Err(Early::new(
                    codes::INVALID_REQUEST,
                    "MCP-Protocol-Version differs from the version negotiated for this session",
                    400,
                )),
                Some(v) => Ok(Route::Legacy(v)),
                None => Err(self.unsupported(h)),
            };
        }
        if initialize {
            return self
                .newest_legacy()
                .map(Route::Legacy)
                .ok_or_else(|| self.unsupported("initialize"));
        }
        if modern_body {
            return Ok(Route::Modern);
        }
        let assumed = session.unwrap_or(ASSUMED);
        if self.serves(assumed) {
            Ok(Route::Legacy(assumed))
        } else {
            Err(self.unsupported(assumed.as_str()))
        }
    }

    /// Chooses the era of a stdio line: a request naming a version in `_meta` (`modern_body`)
    /// means 2026-07-28; otherwise the negotiated legacy version (2025-03-26 before any
    /// `initialize`).
    pub(super) fn route_stdio(&self, modern_body: bool, negotiated: Option<Revision>) -> Route {
        if modern_body {
            Route::Modern
        } else {
            Route::Legacy(negotiated.unwrap_or(ASSUMED))
        }
    }

    /// Validates a request and reads its call. `headers` is given for a single HTTP request
    /// under 2026-07-28 (the header rules apply), `None` on stdio and in batches.
    pub(super) fn prepare(
        &self,
        route: Route,
        req: &Req,
        parsed: &Parsed,
        headers: Option<Headers>,
    ) -> Result<Prepared, Early> {
        let version = match route {
            Route::Legacy(v) => v,
            Route::Modern => self.modern_ladder(req, parsed, headers)?,
        };
        let method = req.method.as_ref();
        let not_found = || {
            Early::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
                if version.is_modern() { 404 } else { 200 },
            )
        };
        let p = match &parsed.params {
            Some(p) => p,
            None => {
                return Err(Early::new(
                    codes::INVALID_PARAMS,
                    "params must be an object",
                    400,
                ));
            }
        };
        let modern = version.is_modern();
        let mut caps = if modern {
            ClientCaps::read(parsed.meta.as_ref().and_then(|m| m.capabilities))
        } else {
            ClientCaps::default()
        };
        if self.input_unchecked {
            (caps.elicitation, caps.sampling, caps.roots) = (true, true, true);
        }
        let tasks_legacy = version == Revision::V2025_11_25;
        let task_id = || match &p.task_id {
            Some(id) => Ok(id.to_string()),
            None => Err(invalid_params(format!("{method} needs `taskId`"))),
        };
        // 2026-07-28: the tasks/* methods are the extension's; a client that does not
        // declare it gets -32021 (SEP-2663).
        if modern && !caps.tasks && matches!(method, "tasks/get" | "tasks/cancel" | "tasks/update")
        {
            return Err(ClientCaps::missing(ClientCaps::tasks_required()));
        }
        let call = match (method, modern) {
            ("initialize", false) => {
                let asked = p.protocol_version.as_deref().and_then(Revision::parse);
                let chosen = asked
                    .filter(|v| !v.is_modern() && self.serves(*v))
                    .or(self.newest_legacy())
                    .ok_or_else(|| self.unsupported(p.protocol_version.as_deref().unwrap_or("")))?;
                Call::Initialize(chosen)
            }
            ("server/discover", true) if self.discover => Call::Discover,
            ("ping", false) => Call::Ping,
            ("tools/list", _) => Call::ToolsList,
            ("tools/call", _) => tool_call(p, version, caps),
            ("tasks/get", true) => task_id().map_or_else(Call::Invalid, Call::TaskGet),
            ("tasks/get", false) if tasks_legacy => {
                task_id().map_or_else(Call::Invalid, Call::TaskGet)
            }
            ("tasks/result", false) if tasks_legacy => {
                task_id().map_or_else(Call::Invalid, Call::TaskResult)
            }
            ("tasks/cancel", true) => task_id().map_or_else(Call::Invalid, Call::TaskCancel),
            ("tasks/cancel", false) if tasks_legacy => {
                task_id().map_or_else(Call::Invalid, Call::TaskCancel)
            }
            ("tasks/list", false) if tasks_legacy => {
                Call::TaskList(p.cursor.as_deref().map(str::to_owned))
            }
            ("tasks/update", true) => task_id().map_or_else(Call::Invalid, Call::TaskUpdate),
            ("resources/list", _) => Call::ResourcesList,
            ("resources/templates/list", _) => Call::TemplatesList,
            ("resources/read", _) => match &p.uri {
                Some(uri) => Call::Read(uri.to_string()),
                None => Call::Invalid(invalid_params("resources/read needs `uri`")),
            },
            ("prompts/list", _) => Call::PromptsList,
            ("prompts/get", _) => prompt_call(p),
            _ => return Err(not_found()),
        };
        if let Call::MissingCapability(required) = call {
            return Err(ClientCaps::missing(required));
        }
        Ok(Prepared {
            call,
            version,
            progress: parsed.progress_token().map(RawValue::to_owned),
        })
    }

    /// The `Mcp-Param-*` headers of a 2026-07-28 HTTP `tools/call` against its arguments
    /// (with `header_tools` on): `None` when nothing is mirrored, else whether they match
    /// (400 with -32020 when they do not).
    pub(super) fn param_headers(
        &self,
        req: &Req,
        parsed: &Parsed,
        headers: Option<Headers>,
    ) -> Option<Result<(), Early>> {
        let h = headers.filter(|_| self.header_tools && req.method == "tools/call")?;
        let p = parsed.params.as_ref()?;
        let checked = param_tools::check(p.name.as_deref()?, p.arguments, h.params)?;
        Some(checked.map_err(|what| {
            Early::new(
                mcp_codes::HEADER_MISMATCH,
                format!("Header mismatch: {what} does not match the request body"),
                400,
            )
        }))
    }

    /// The 2026-07-28 checks, first failure wins: `_meta` carries version and capabilities
    /// (-32602); the headers agree with the body (-32020); the version is served (-32022).
    fn modern_ladder(
        &self,
        req: &Req,
        parsed: &Parsed,
        headers: Option<Headers>,
    ) -> Result<Revision, Early> {
        let meta = parsed.meta.as_ref().filter(|_| parsed.params_ok);
        let (Some(raw_version), Some(_caps)) = (
            meta.and_then(|m| m.version),
            meta.and_then(|m| m.capabilities),
        ) else {
            return Err(Early::new(
                codes::INVALID_PARAMS,
                "params._meta must carry io.modelcontextprotocol/protocolVersion and \
                 io.modelcontextprotocol/clientCapabilities",
                400,
            ));
        };
        let version: Option<String> = serde_json::from_str(raw_version.get()).ok();
        if let Some(h) = headers {
            let mismatch = |what: &str| {
                Err(Early::new(
                    mcp_codes::HEADER_MISMATCH,
                    format!("Header mismatch: {what} does not match the request body"),
                    400,
                ))
            };
            if h.version.is_none() || h.version != version.as_deref() {
                return mismatch("MCP-Protocol-Version");
            }
            if h.method != Some(req.method.as_ref()) {
                return mismatch("Mcp-Method");
            }
            let p = parsed.params.as_ref();
            let body_name = match NameParam::of(&req.method) {
                Some(NameParam::Name) => p.and_then(|p| p.name.as_deref()),
                Some(NameParam::Uri) => p.and_then(|p| p.uri.as_deref()),
                Some(NameParam::TaskId) => p.and_then(|p| p.task_id.as_deref()),
                None => None,
            };
            if let Some(body_name) = body_name
                && h.name.and_then(headers::decode_value).as_deref() != Some(body_name)
            {
                return mismatch("Mcp-Name");
            }
        }
        let Some(version) = version else {
            return Err(Early::new(
                codes::INVALID_PARAMS,
                "io.modelcontextprotocol/protocolVersion must be a string",
                400,
            ));
        };
        match Revision::parse(&version) {
            Some(v) if v.is_modern() && self.serves(v) => Ok(v),
            _ => Err(self.unsupported(&version)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn client_caps_are_the_members_that_are_objects() {
        let caps = |s: &str| {
            let r = raw(s);
            let c = ClientCaps::read(Some(&r));
            (c.tasks, c.elicitation, c.sampling, c.roots)
        };
        let tasks_ext =
            format!(r#"{{"extensions": {{"{TASKS_EXTENSION}": {{}}}}, "roots": {{}}}}"#);
        assert_eq!(caps(&tasks_ext), (true, false, false, true));
        assert_eq!(
            caps(r#"{"elicitation": {"form": {}}, "sampling": true, "roots": null}"#),
            (false, true, false, false)
        );
        assert_eq!(
            caps(r#"{"extensions": [1], "sampling": {}}"#),
            (false, false, true, false)
        );
        let other_ext = r#"{"extensions": {"io.modelcontextprotocol/tasks": 1, "x": {}}}"#;
        assert_eq!(caps(other_ext), (false, false, false, false));
        assert_eq!(caps("[]"), (false, false, false, false));
        assert!(!ClientCaps::read(None).tasks);
    }

    #[test]
    fn classify_messages() {
        let r = raw(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
        assert!(matches!(classify(&r), Msg::Request(id, _) if id.get() == "7"));
        let n = raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(classify(&n), Msg::Notification(_)));
        for bad in [
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            r#"{"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"[1]"#,
            r#""str""#,
        ] {
            assert!(matches!(classify(&raw(bad)), Msg::Invalid(_)), "{bad}");
        }
        let resp = raw(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert!(matches!(classify(&resp), Msg::ClientResponse));
    }

    #[test]
    fn routing_rules() {
        let p = Protocol::new(&ServeConfig::default()).unwrap();
        assert_eq!(
            p.route_http(Some("2026-07-28"), None, false, true).unwrap(),
            Route::Modern
        );
        assert_eq!(
            p.route_http(None, None, false, false).unwrap(),
            Route::Legacy(ASSUMED)
        );
        assert_eq!(
            p.route_http(None, None, true, false).unwrap(),
            Route::Legacy(Revision::V2025_11_25)
        );
        let e = p
            .route_http(Some("1999-01-01"), None, false, false)
            .unwrap_err();
        assert_eq!(
            (e.error.code, e.status),
            (mcp_codes::UNSUPPORTED_VERSION, 400)
        );
        let e = p
            .route_http(
                Some("2025-06-18"),
                Some(Revision::V2025_11_25),
                false,
                false,
            )
            .unwrap_err();
        assert_eq!(e.status, 400);
        assert!(p.batch_allowed(Route::Legacy(Revision::V2025_03_26)));
        assert!(!p.batch_allowed(Route::Legacy(Revision::V2025_06_18)));
        assert!(!p.batch_allowed(Route::Modern));
    }
}
