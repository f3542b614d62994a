//! Connecting: era detection (`server/discover`; then `initialize`; then 2026-07-28 without
//! discovery), the legacy handshake and session, `tools/list`, and a transport left ready
//! for load with the era's headers and cancel style.

use super::ops::{Operation, client_info};
use super::{
    Attempt, ConnectOptions, Endpoint, Era, McpError, ProtocolChoice, Revision, ServerInfo,
    ToolInfo, TransportChoice, TransportKind, expand_env,
};
use crate::jsonrpc::Id;
use crate::protocol::codes;
use crate::transport::{
    AnswerBudget, AnyTransport, CancelStyle, Challenge, Event, HttpClient, HttpOptions,
    HttpTransport, LegacyInit, LegacySseTransport, McpHeaders, OpenConnections, Outgoing, Reply,
    StdioTransport, Transport,
};
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Uri};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The longest wait for an answer to `server/discover` over stdio: a legacy server may
/// ignore a method it does not know.
const STDIO_DISCOVER_WAIT: Duration = Duration::from_secs(5);
/// Pages of a listing (`tools/list`, …) read at most.
const MAX_TOOL_PAGES: usize = 100;

/// A connected server: what was learnt, and a transport ready for load.
#[derive(Debug)]
pub struct Connected {
    pub server: Arc<ServerInfo>,
    pub transport: AnyTransport,
}

/// Connects to one target, as often as there are workers. Holds the HTTP client every
/// transport shares (the target, its TLS setup, the headers) and splits the connection pool
/// among the transports it makes.
#[derive(Debug)]
pub struct Connector {
    target: Endpoint,
    opts: ConnectOptions,
    http: Option<HttpSetup>,
    /// Transports made so far.
    made: AtomicUsize,
    /// How many transports share the pool (`ConnectOptions::transports`, or what
    /// [`Connector::share_pool`] set).
    sharing: AtomicUsize,
    /// HTTP transports speak the legacy HTTP+SSE transport (chosen, or detected).
    legacy_sse: AtomicBool,
}

#[derive(Debug)]
struct HttpSetup {
    client: HttpClient,
    opts: HttpOptions,
}

/// Share `k` of `total` split `n` ways: the shares differ by one at most and add up to
/// `total` (one at least each).
fn share(total: usize, k: usize, n: usize) -> usize {
    let n = n.max(1);
    (total / n + usize::from(k % n < total % n)).max(1)
}

impl Connector {
    /// Checks the target and builds the HTTP client (`${VAR}` in header values expanded).
    pub fn new(target: Endpoint, opts: ConnectOptions) -> Result<Self, McpError> {
        let http = match &target {
            Endpoint::Http { url, headers } => {
                let url = url
                    .parse::<Uri>()
                    .map_err(|e| McpError::Target(format!("url {url:?}: {e}")))?;
                if !matches!(url.scheme_str(), Some("http" | "https")) {
                    return Err(McpError::Target(format!(
                        "url scheme {:?}: use http or https",
                        url.scheme_str().unwrap_or("")
                    )));
                }
                if url.host().is_none_or(str::is_empty) {
                    return Err(McpError::Target(format!("url {url}: no host")));
                }
                let mut parsed = Vec::with_capacity(headers.len());
                for (name, value) in headers {
                    let value = expand_env(value, |v| std::env::var(v).ok()).map_err(|var| {
                        McpError::MissingEnv {
                            header: name.clone(),
                            var,
                        }
                    })?;
                    let n = HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| McpError::Target(format!("invalid header name {name:?}")))?;
                    // The value may be a secret: the error names the header only.
                    let mut v = HeaderValue::from_str(&value).map_err(|_| {
                        McpError::Target(format!("header {name}: invalid characters in value"))
                    })?;
                    v.set_sensitive(true);
                    parsed.push((n, v));
                }
                let http_opts = HttpOptions {
                    pool_size: opts.pool_size,
                    headers: parsed,
                    max_message_bytes: opts.max_message_bytes,
                    answer_budget: AnswerBudget::new(opts.max_answer_memory),
                    connect_timeout: opts.connect_timeout,
                    exchange_timeout: opts.exchange_timeout,
                    session_lost_on_400: opts.session_lost_on_400,
                    auth: opts.auth.clone(),
                    tls: opts.tls.clone(),
                    open_connections: OpenConnections::default(),
                };
                Some(HttpSetup {
                    client: HttpClient::new(&url, &http_opts)?,
                    opts: http_opts,
                })
            }
            Endpoint::Stdio(_) => None,
        };
        Ok(Connector {
            target,
            http,
            made: AtomicUsize::new(0),
            sharing: AtomicUsize::new(opts.transports),
            legacy_sse: AtomicBool::new(opts.transport == TransportChoice::Sse),
            opts,
        })
    }

    pub fn target(&self) -> &Endpoint {
        &self.target
    }

    pub fn options(&self) -> &ConnectOptions {
        &self.opts
    }

    /// The connections every HTTP transport made here has open; none for stdio.
    pub fn open_connections(&self) -> Option<OpenConnections> {
        self.http.as_ref().map(|h| h.opts.open_connections.clone())
    }

    /// The transports made from now on split the pool `n` ways (a run that makes more of
    /// them than it first said: a session per virtual user).
    pub fn share_pool(&self, n: usize) {
        self.sharing.store(n, Ordering::Relaxed);
    }

    /// A bare transport with nothing negotiated (probes craft their own exchanges).
    pub fn raw_transport(&self) -> Result<AnyTransport, McpError> {
        match (&self.target, &self.http) {
            (_, Some(h)) => {
                let k = self.made.fetch_add(1, Ordering::Relaxed);
                let opts = HttpOptions {
                    pool_size: share(h.opts.pool_size, k, self.sharing.load(Ordering::Relaxed)),
                    ..h.opts.clone()
                };
                let client = h.client.clone();
                Ok(if self.legacy_sse.load(Ordering::Relaxed) {
                    AnyTransport::LegacySse(Box::new(LegacySseTransport::new(client, &opts)))
                } else {
                    AnyTransport::Http(Box::new(HttpTransport::new(client, &opts)))
                })
            }
            (Endpoint::Stdio(o), None) => {
                let mut o = o.clone();
                o.max_line_bytes = self.opts.max_message_bytes;
                Ok(AnyTransport::Stdio(Box::new(StdioTransport::spawn(&o)?)))
            }
            (Endpoint::Http { .. }, None) => unreachable!("an HTTP target always has a client"),
        }
    }

    /// Detects or pins the era, performs the handshake, lists the tools: a transport ready
    /// for load.
    pub async fn connect(&self) -> Result<Connected, McpError> {
        if let (Some(auth), Some(_)) = (&self.opts.auth, &self.http) {
            auth.ready().await.map_err(McpError::Auth)?;
        }
        let mut transport = self.raw_transport()?;
        if let AnyTransport::LegacySse(t) = &mut transport {
            t.connected(self.opts.handshake_timeout)
                .await
                .map_err(|e| McpError::Protocol {
                    step: "the legacy HTTP+SSE stream",
                    detail: e.to_string(),
                })?;
        }
        let mut server = match self.negotiate(&mut transport).await {
            Err(refused) if self.may_detect_legacy_sse(&refused) => {
                let (sse, server) = self.detect_legacy_sse(refused).await?;
                transport = sse;
                server
            }
            agreed => agreed?,
        };
        server.transport = TransportKind::of(&transport);
        if let AnyTransport::Stdio(s) = &mut transport {
            // Under 2026-07-28 the start-up ends with the first answer (discovery's).
            s.mark_connected();
        }
        if self.opts.list_tools {
            server.tools = list_tools(&mut transport, server.revision, &self.opts).await?;
        }
        if let AnyTransport::Stdio(s) = &mut transport {
            s.connected();
        }
        Ok(Connected {
            server: Arc::new(server),
            transport,
        })
    }

    /// `server/discover` was refused -32022 with 2026-07-28 in `data.supported`: the server
    /// speaks it, so it is sent once more with that revision and, refused again, 2026-07-28
    /// is spoken without discovery; the legacy `initialize` is never tried.
    async fn retry_discover(
        &self,
        t: &mut AnyTransport,
        mut tried: Vec<Attempt>,
    ) -> Result<ServerInfo, McpError> {
        const RETRY: &str = "server/discover 2026-07-28 (retried: data.supported names it)";
        match discover(t, &self.opts).await? {
            Discovery::Modern(info) => {
                tried.push(Attempt::new(RETRY, "answered with 2026-07-28 supported"));
                Ok(ServerInfo {
                    detection: "server/discover refused -32022 with 2026-07-28 in \
                                data.supported; retried with 2026-07-28, answered with it \
                                supported"
                        .into(),
                    negotiation: tried,
                    ..info
                })
            }
            Discovery::Legacy { answered, .. } => {
                tried.push(Attempt::new(RETRY, answered));
                without_discovery(t, tried, &self.opts).await
            }
        }
    }

    /// Whether an `auto` agreement over Streamable HTTP that ended so may be the legacy
    /// HTTP+SSE transport: discover, `initialize` and `tools/list` all refused.
    fn may_detect_legacy_sse(&self, e: &McpError) -> bool {
        self.opts.transport == TransportChoice::Auto
            && self.http.is_some()
            && !self.legacy_sse.load(Ordering::Relaxed)
            && matches!(
                e,
                McpError::Protocol {
                    step: "protocol agreement",
                    ..
                }
            )
    }

    /// Streamable HTTP was refused (`refused`): a GET that opens an SSE stream whose first
    /// event is `endpoint` is the legacy HTTP+SSE transport, spoken from then on by every
    /// transport made. The error names both transports tried.
    async fn detect_legacy_sse(
        &self,
        refused: McpError,
    ) -> Result<(AnyTransport, ServerInfo), McpError> {
        let both = |sse: &dyn std::fmt::Display| McpError::Protocol {
            step: "protocol agreement",
            detail: format!(
                "neither transport answered: Streamable HTTP: {refused}; the legacy HTTP+SSE \
                 transport (2024-11-05): {sse}"
            ),
        };
        self.legacy_sse.store(true, Ordering::Relaxed);
        let mut transport = self.raw_transport()?;
        if let AnyTransport::LegacySse(t) = &mut transport
            && let Err(e) = t.connected(self.opts.handshake_timeout).await
        {
            self.legacy_sse.store(false, Ordering::Relaxed);
            return Err(both(&e));
        }
        match self.negotiate(&mut transport).await {
            Ok(server) => Ok((
                transport,
                ServerInfo {
                    detection: format!(
                        "Streamable HTTP refused ({refused}); a GET opened a legacy HTTP+SSE \
                         stream (2024-11-05): {}",
                        server.detection
                    ),
                    ..server
                },
            )),
            Err(e) => Err(both(&e)),
        }
    }

    /// Another transport for a server already connected once, with the same revision and no
    /// discovery or listing: a fresh session for legacy HTTP, nothing at all for 2026-07-28
    /// HTTP, a new child (with its handshake) for stdio.
    pub async fn attach(&self, server: &ServerInfo) -> Result<AnyTransport, McpError> {
        let mut transport = self.raw_transport()?;
        match server.era {
            Era::Modern => set_modern(&mut transport),
            Era::Legacy => {
                initialize(&mut transport, server.revision, true, None, &self.opts).await?;
            }
        }
        Ok(transport)
    }

    /// Agrees on the revision. A pinned legacy revision: `initialize` offering it. A pinned
    /// 2026-07-28: `server/discover`, and 2026-07-28 spoken whatever it answers (a 2026-07-28
    /// server need not implement it). `auto`: `server/discover`; then `initialize` with the
    /// newest legacy revision (or the one a -32022 refusal named); then, when `initialize`
    /// is refused or names no usable version, 2026-07-28 without discovery if `tools/list`
    /// with its `_meta` is answered.
    async fn negotiate(&self, t: &mut AnyTransport) -> Result<ServerInfo, McpError> {
        if matches!(t, AnyTransport::LegacySse(_)) {
            return self.negotiate_legacy_sse(t).await;
        }
        if let ProtocolChoice::Pinned(r) = self.opts.protocol
            && !r.is_modern()
        {
            return match initialize(t, r, true, None, &self.opts).await? {
                Initialized::Legacy {
                    revision,
                    result,
                    session,
                } => Ok(legacy_info(
                    "pinned by --protocol",
                    vec![],
                    revision,
                    &result,
                    session,
                )),
                Initialized::LateDiscover(info) => Ok(info),
            };
        }
        let (answered, offered, unanswered, lists_modern) = match discover(t, &self.opts).await? {
            Discovery::Modern(info) => return Ok(info),
            Discovery::Legacy {
                answered,
                offered,
                unanswered,
                lists_modern,
            } => (answered, offered, unanswered, lists_modern),
        };
        let reason = format!("server/discover {answered}");
        let mut tried = vec![Attempt::new("server/discover", answered)];
        if lists_modern {
            // A -32022 naming 2026-07-28 in `data.supported`: retried once with it.
            return self.retry_discover(t, tried).await;
        }
        if self.opts.protocol != ProtocolChoice::Auto {
            set_modern(t);
            return Ok(ServerInfo {
                detection: format!(
                    "pinned by --protocol; {reason}; 2026-07-28 spoken without discovery"
                ),
                ..undiscovered_modern(tried)
            });
        }
        // A stdio server slow to start may answer discover after the wait: that answer still
        // decides if it comes before a usable answer to initialize.
        let late = (unanswered && matches!(t, AnyTransport::Stdio(_)))
            .then(|| Id::Str(DISCOVER_ID.into()));
        let offer = offered.unwrap_or(Revision::LATEST_LEGACY);
        match initialize(t, offer, false, late.as_ref(), &self.opts).await {
            Ok(Initialized::LateDiscover(info)) => {
                tried.push(Attempt::new(
                    format!("initialize {offer}"),
                    "not answered before server/discover answered late with 2026-07-28 \
                     supported",
                ));
                Ok(ServerInfo {
                    detection: format!(
                        "{reason}; initialize sent, then server/discover answered late with \
                         2026-07-28 supported"
                    ),
                    negotiation: tried,
                    ..info
                })
            }
            Ok(Initialized::Legacy {
                revision,
                result,
                session,
            }) => Ok(legacy_info(&reason, tried, revision, &result, session)),
            Err(e) if refuses_initialize(&e) => {
                tried.push(Attempt::new(format!("initialize {offer}"), e.to_string()));
                without_discovery(t, tried, &self.opts).await
            }
            Err(e) => Err(e),
        }
    }
}

impl Connector {
    /// Over the legacy HTTP+SSE transport only the legacy era is spoken: `initialize`
    /// offering the pinned revision, or the newest legacy one (the server may agree on an
    /// older one, 2024-11-05 included).
    async fn negotiate_legacy_sse(&self, t: &mut AnyTransport) -> Result<ServerInfo, McpError> {
        let (offer, pinned, reason) = match self.opts.protocol {
            ProtocolChoice::Pinned(r) if r.is_modern() => {
                return Err(McpError::Protocol {
                    step: "protocol agreement",
                    detail: format!("{r} is not spoken over the legacy HTTP+SSE transport"),
                });
            }
            ProtocolChoice::Pinned(r) => (r, true, "pinned by --protocol"),
            _ => (
                Revision::LATEST_LEGACY,
                false,
                "the legacy HTTP+SSE transport",
            ),
        };
        match initialize(t, offer, pinned, None, &self.opts).await? {
            Initialized::Legacy {
                revision, result, ..
            } => Ok(legacy_info(reason, vec![], revision, &result, true)),
            Initialized::LateDiscover(info) => Ok(info),
        }
    }
}

/// Whether `initialize` failing with `e` is the server refusing the legacy era (an error
/// answer, an error status, a version mcpload does not speak), not the exchange failing.
fn refuses_initialize(e: &McpError) -> bool {
    matches!(
        e,
        McpError::Rpc {
            step: "initialize",
            ..
        } | McpError::Status {
            step: "initialize",
            ..
        } | McpError::Protocol {
            step: "initialize",
            ..
        }
    )
}

/// 2026-07-28 with nothing discovered: no capabilities, no versions, no server info.
fn undiscovered_modern(negotiation: Vec<Attempt>) -> ServerInfo {
    ServerInfo {
        era: Era::Modern,
        revision: Revision::V2026_07_28,
        detection: String::new(),
        negotiation,
        server_info: Value::Null,
        capabilities: json!({}),
        supported_versions: Vec::new(),
        session: false,
        transport: TransportKind::StreamableHttp,
        tools: Vec::new(),
    }
}

/// The last resort of `auto`: one `tools/list` with the 2026-07-28 `_meta` and headers. A
/// result means the server speaks 2026-07-28 without `server/discover`; anything else ends
/// the agreement with every attempt named.
async fn without_discovery(
    t: &mut AnyTransport,
    mut tried: Vec<Attempt>,
    opts: &ConnectOptions,
) -> Result<ServerInfo, McpError> {
    const STEP: &str = "tools/list";
    set_modern(t);
    let op = Operation::new(Revision::V2026_07_28, STEP, None)?;
    let id = Id::Str("mcpload-undiscovered".into());
    let answer = call(t, &op, &id, opts.handshake_timeout).await?;
    let answered =
        match handshake_result(answer.response, answer.status, STEP, opts.handshake_timeout) {
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
    tried.push(Attempt::new(
        "tools/list 2026-07-28",
        answered.as_deref().unwrap_or("answered with a result"),
    ));
    let story = tried
        .iter()
        .map(|a| format!("{} {}", a.sent, a.answered))
        .collect::<Vec<_>>()
        .join("; ");
    if answered.is_some() {
        return Err(McpError::Protocol {
            step: "protocol agreement",
            detail: format!("no revision agreed: {story}"),
        });
    }
    Ok(ServerInfo {
        detection: format!("{story}: 2026-07-28 spoken without discovery"),
        ..undiscovered_modern(tried)
    })
}

/// What a legacy handshake taught.
fn legacy_info(
    reason: &str,
    mut negotiation: Vec<Attempt>,
    revision: Revision,
    result: &Value,
    session: bool,
) -> ServerInfo {
    negotiation.push(Attempt::new("initialize", format!("agreed {revision}")));
    ServerInfo {
        era: Era::Legacy,
        revision,
        detection: format!("{reason}; initialize agreed {revision}"),
        negotiation,
        server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
        capabilities: result.get("capabilities").cloned().unwrap_or(json!({})),
        supported_versions: Vec::new(),
        session,
        transport: TransportKind::StreamableHttp,
        tools: Vec::new(),
    }
}

enum Discovery {
    Modern(ServerInfo),
    Legacy {
        /// What `server/discover` answered, in words.
        answered: String,
        /// A legacy revision the server said it supports (from -32022 `data.supported`).
        offered: Option<Revision>,
        /// Nothing came back within the wait (no answer, no status).
        unanswered: bool,
        /// A -32022 refusal whose `data.supported` names 2026-07-28: the server speaks it.
        lists_modern: bool,
    },
}

/// How `initialize` ended.
enum Initialized {
    /// The handshake: the agreed revision, its result, whether a session was issued.
    Legacy {
        revision: Revision,
        result: Value,
        session: bool,
    },
    /// A late `server/discover` answer with 2026-07-28 supported came first (stdio).
    LateDiscover(ServerInfo),
}

/// The id of `server/discover`, also watched for after the wait ran out.
const DISCOVER_ID: &str = "mcpload-discover";

/// The 2026-07-28 server a `server/discover` response describes, if it supports 2026-07-28.
fn modern_info(response: &Value) -> Option<ServerInfo> {
    let r = response.get("result")?;
    let supported = strings(r.get("supportedVersions"));
    if !supported
        .iter()
        .any(|v| v == Revision::V2026_07_28.as_str())
    {
        return None;
    }
    let server_info = r
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
        .or_else(|| r.get("serverInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    Some(ServerInfo {
        era: Era::Modern,
        revision: Revision::V2026_07_28,
        detection: "server/discover answered with 2026-07-28 supported".into(),
        negotiation: vec![Attempt::new(
            "server/discover",
            "answered with 2026-07-28 supported",
        )],
        server_info,
        capabilities: r.get("capabilities").cloned().unwrap_or(json!({})),
        supported_versions: supported,
        session: false,
        transport: TransportKind::StreamableHttp,
        tools: Vec::new(),
    })
}

fn set_modern(t: &mut AnyTransport) {
    if let AnyTransport::Http(h) = t {
        h.set_protocol_version(Some(Revision::V2026_07_28.as_str()));
        h.set_cancel_style(CancelStyle::CloseStream);
    }
}

/// Sends `server/discover` with the 2026-07-28 `_meta` and headers.
async fn discover(t: &mut AnyTransport, opts: &ConnectOptions) -> Result<Discovery, McpError> {
    set_modern(t);
    let op = Operation::new(Revision::V2026_07_28, "server/discover", None)?;
    let id = Id::Str(DISCOVER_ID.into());
    let wait = match t {
        AnyTransport::Http(_) | AnyTransport::LegacySse(_) => opts.handshake_timeout,
        AnyTransport::Stdio(_) | AnyTransport::Fleet(_) => {
            opts.handshake_timeout.min(STDIO_DISCOVER_WAIT)
        }
    };
    let answer = call(t, &op, &id, wait).await?;
    if let Some(info) = answer.response.as_ref().and_then(modern_info) {
        return Ok(Discovery::Modern(info));
    }
    let result = answer.response.as_ref().and_then(|r| r.get("result"));
    if let AnyTransport::Http(h) = t {
        h.set_protocol_version(None);
        h.set_cancel_style(CancelStyle::Notify);
    }
    let error = answer.any_error.clone();
    let supported: Vec<Revision> = (answer.response.as_ref())
        .and_then(|r| r.pointer("/error/data/supported"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().and_then(Revision::parse))
                .collect()
        })
        .unwrap_or_default();
    let offered = supported.iter().copied().filter(|r| !r.is_modern()).max();
    let refused_version = matches!(&error, Some((code, _)) if *code == codes::UNSUPPORTED_VERSION);
    let lists_modern = refused_version && supported.contains(&Revision::V2026_07_28);
    let mut answered = match (answer.status, &error, result) {
        (_, Some((code, msg)), _) => format!("refused with {code} ({msg})"),
        (_, None, Some(_)) => "answered without 2026-07-28".into(),
        (Some(s), None, None) => format!("answered HTTP {s}"),
        (None, None, None) => format!("got no answer in {wait:?}"),
    };
    if let Some(s) = answer.status.filter(|_| error.is_some()) {
        answered.push_str(&format!(" over HTTP {s}"));
    }
    let unanswered = answer.status.is_none() && answer.response.is_none();
    Ok(Discovery::Legacy {
        answered,
        offered,
        unanswered,
        lists_modern,
    })
}

/// `initialize` (offering `offer`), then `notifications/initialized`; on HTTP the session id
/// and the protocol-version header are set, and re-initialization on 404 is armed. With
/// `late_discover` (stdio), an answer to that unanswered `server/discover` still counts.
async fn initialize(
    t: &mut AnyTransport,
    offer: Revision,
    pinned: bool,
    late_discover: Option<&Id>,
    opts: &ConnectOptions,
) -> Result<Initialized, McpError> {
    const STEP: &str = "initialize";
    let params = json!({
        "protocolVersion": offer.as_str(),
        "capabilities": opts.client_capabilities,
        "clientInfo": client_info(),
    });
    let op = Operation::new(offer, "initialize", Some(&params))?;
    let id = Id::Str("mcpload-initialize".into());
    let answer = match (late_discover, &mut *t) {
        (Some(late), AnyTransport::Stdio(s)) => {
            match race_late_discover(s, &op, &id, late, opts.handshake_timeout).await? {
                Raced::LateDiscover(info) => return Ok(Initialized::LateDiscover(info)),
                Raced::Initialize(answer) => answer,
            }
        }
        _ => call(t, &op, &id, opts.handshake_timeout).await?,
    };
    let result = handshake_result(answer.response, answer.status, STEP, opts.handshake_timeout)?;
    let chosen = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let revision = Revision::parse(chosen)
        .filter(|r| !r.is_modern())
        .ok_or_else(|| McpError::Protocol {
            step: STEP,
            detail: format!(
                "the server chose protocol version {chosen:?}, which mcpload does not speak"
            ),
        })?;
    if pinned && revision != offer {
        return Err(McpError::Protocol {
            step: STEP,
            detail: format!("offered {offer} (pinned), the server chose {revision}"),
        });
    }
    let mut initialized = Vec::new();
    crate::jsonrpc::encode_notification(&mut initialized, "notifications/initialized", None);
    let initialized = Bytes::from(initialized);
    let session = match t {
        AnyTransport::Http(h) => {
            if revision.sends_version_header() {
                h.set_protocol_version(Some(revision.as_str()));
            }
            let session = answer.session;
            let has_session = session.is_some();
            h.set_session(session);
            let reply = h
                .post_once(
                    initialized.clone(),
                    &McpHeaders::default(),
                    opts.handshake_timeout,
                )
                .await?;
            if reply.status >= 400 {
                return Err(McpError::Status {
                    step: "notifications/initialized",
                    status: reply.status,
                    detail: String::new(),
                });
            }
            if has_session {
                h.set_legacy_init(reinit(&op, &id, initialized));
                // Declared capabilities (the profile's `[input]`) let the server ask outside
                // any call too, on the session's own stream, which SDK clients open.
                if !opts.client_capabilities.is_empty() {
                    h.listen_for_server_requests();
                    h.listening(opts.handshake_timeout).await;
                }
            }
            has_session
        }
        AnyTransport::Stdio(s) => {
            s.send(Outgoing::single(
                initialized.clone(),
                None,
                McpHeaders::default(),
            ));
            // A process per session starts every later child with this same handshake.
            s.set_handshake(reinit(&op, &id, initialized));
            s.mark_connected();
            false
        }
        AnyTransport::LegacySse(s) => {
            s.send(Outgoing::single(
                initialized.clone(),
                None,
                McpHeaders::default(),
            ));
            s.set_legacy_init(reinit(&op, &id, initialized));
            true
        }
        // A fleet's later children are started with the handshake of its first.
        AnyTransport::Fleet(f) => {
            f.send(Outgoing::single(initialized, None, McpHeaders::default()));
            false
        }
    };
    Ok(Initialized::Legacy {
        revision,
        result,
        session,
    })
}

/// What opening a lost session anew sends: this `initialize` again, then `initialized`.
fn reinit(initialize: &Operation, id: &Id, initialized: Bytes) -> LegacyInit {
    let mut body = Vec::new();
    initialize.stamp(&mut body, id);
    LegacyInit {
        initialize: Bytes::from(body),
        initialized,
    }
}

enum Raced {
    LateDiscover(ServerInfo),
    Initialize(Answer),
}

/// Sends `initialize` over stdio and waits for whichever usable answer comes first: its own,
/// or a late answer to `server/discover` (`late`) with 2026-07-28 supported. A -32022 refusal
/// of `initialize` while discover is unanswered is the server already speaking 2026-07-28:
/// the wait goes on for discover's answer.
async fn race_late_discover(
    s: &mut StdioTransport,
    op: &Operation,
    id: &Id,
    late: &Id,
    wait: Duration,
) -> Result<Raced, McpError> {
    let mut body = Vec::with_capacity(256);
    op.stamp(&mut body, id);
    s.send(Outgoing::single(
        Bytes::from(body),
        Some(id.clone()),
        McpHeaders::default(),
    ));
    let deadline = Instant::now() + wait;
    let mut refused = None;
    loop {
        let event = match tokio::time::timeout_at(deadline, s.next_event()).await {
            Ok(event) => event,
            Err(_) => break,
        };
        match event {
            Event::Message { bytes, .. } => {
                if let Some(info) = response_for(&bytes, late).as_ref().and_then(modern_info) {
                    return Ok(Raced::LateDiscover(info));
                }
                if let Some(r) = response_for(&bytes, id) {
                    let any_error = rpc_error(&r);
                    let answer = Answer {
                        status: None,
                        response: Some(r),
                        session: None,
                        any_error,
                    };
                    if matches!(&answer.any_error, Some((code, _)) if *code == codes::UNSUPPORTED_VERSION)
                    {
                        refused = Some(answer);
                        continue;
                    }
                    return Ok(Raced::Initialize(answer));
                }
            }
            Event::Down { error } => return Err(error.into()),
            _ => {}
        }
    }
    Ok(Raced::Initialize(refused.unwrap_or(Answer {
        status: None,
        response: None,
        session: None,
        any_error: None,
    })))
}

/// Lists every tool, following `nextCursor`.
async fn list_tools(
    t: &mut AnyTransport,
    revision: Revision,
    opts: &ConnectOptions,
) -> Result<Vec<ToolInfo>, McpError> {
    let listed = list_all(t, revision, List::Tools, opts.handshake_timeout).await?;
    Ok(listed
        .iter()
        .filter_map(|tool| ToolInfo::of_listing(tool, revision))
        .collect())
}

/// What [`list_all`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    Tools,
    Prompts,
    Resources,
}

impl List {
    /// The method, and the member of its result that holds the items.
    fn method_and_key(self) -> (&'static str, &'static str) {
        match self {
            List::Tools => ("tools/list", "tools"),
            List::Prompts => ("prompts/list", "prompts"),
            List::Resources => ("resources/list", "resources"),
        }
    }
}

/// Every item of a paginated listing as the server wrote it, page after page by
/// `nextCursor` (at most 100 pages), each page waited for up to `wait`.
pub async fn list_all(
    t: &mut AnyTransport,
    revision: Revision,
    list: List,
    wait: Duration,
) -> Result<Vec<Value>, McpError> {
    let (step, key) = list.method_and_key();
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..MAX_TOOL_PAGES {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
        let op = Operation::new(revision, step, params.as_ref())?;
        let id = Id::Str(format!("mcpload-{key}-{page}").into());
        let answer = call(t, &op, &id, wait).await?;
        let mut result = handshake_result(answer.response, answer.status, step, wait)?;
        if let Some(Value::Array(page)) = result.get_mut(key).map(Value::take) {
            items.extend(page);
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(items)
}

/// The strings of a JSON array (none when it is absent or not an array).
pub(super) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The `result` of a handshake call: no answer, an HTTP error status without one, or a
/// JSON-RPC error becomes an [`McpError`] naming `step`.
fn handshake_result(
    response: Option<Value>,
    status: Option<u16>,
    step: &'static str,
    timeout: Duration,
) -> Result<Value, McpError> {
    let response = response.ok_or(match status {
        Some(status) if status >= 400 => McpError::Status {
            step,
            status,
            detail: String::new(),
        },
        _ => McpError::NoAnswer { step, timeout },
    })?;
    if let Some((code, message)) = rpc_error(&response) {
        return Err(McpError::Rpc {
            step,
            code,
            message,
        });
    }
    Ok(response.get("result").cloned().unwrap_or(Value::Null))
}

/// One request and its answer, outside the load machinery.
pub(crate) struct Answer {
    /// The HTTP status (`None` on stdio).
    pub status: Option<u16>,
    /// The response object with the request's id, when one came.
    pub response: Option<Value>,
    /// The session id header of the answer (HTTP).
    pub session: Option<HeaderValue>,
    /// The first error object of the answer, whatever its id (a refusal may carry no id).
    pub any_error: Option<(i64, String)>,
}

/// Sends `op` with `id` and waits up to `wait` for its response.
pub(crate) async fn call(
    t: &mut AnyTransport,
    op: &Operation,
    id: &Id,
    wait: Duration,
) -> Result<Answer, McpError> {
    let mut body = Vec::with_capacity(256);
    op.stamp(&mut body, id);
    let body = Bytes::from(body);
    match t {
        AnyTransport::Http(h) => {
            let mut reply = h.post_once(body.clone(), op.headers(), wait).await?;
            if reply.status == 401 {
                reauthorize(h, &reply).await?;
                reply = h.post_once(body, op.headers(), wait).await?;
                if reply.status == 401 {
                    return Err(McpError::Auth(format!(
                        "the target answered 401 to a token just fetched{}",
                        challenge_said(&reply)
                    )));
                }
            }
            let response = reply.messages.iter().find_map(|(_, b)| response_for(b, id));
            let any_error = reply.messages.iter().find_map(|(_, b)| {
                serde_json::from_slice::<Value>(b)
                    .ok()
                    .as_ref()
                    .and_then(rpc_error)
            });
            Ok(Answer {
                status: Some(reply.status),
                response,
                session: reply.session_id,
                any_error,
            })
        }
        AnyTransport::Stdio(s) => answer_on_stream(&mut **s, body, id, wait).await,
        AnyTransport::LegacySse(s) => answer_on_stream(&mut **s, body, id, wait).await,
        AnyTransport::Fleet(s) => answer_on_stream(&mut **s, body, id, wait).await,
    }
}

/// Sends `body` (request `id`) over a transport whose answers come as messages of their
/// own (stdio, the legacy HTTP+SSE stream) and waits up to `wait` for the response; a
/// refusal of the request's POST is its status.
async fn answer_on_stream<T: Transport>(
    t: &mut T,
    body: Bytes,
    id: &Id,
    wait: Duration,
) -> Result<Answer, McpError> {
    t.send(Outgoing::single(
        body,
        Some(id.clone()),
        McpHeaders::default(),
    ));
    let deadline = Instant::now() + wait;
    let answer = |status, response: Option<Value>| {
        let any_error = response.as_ref().and_then(rpc_error);
        Ok(Answer {
            status,
            response,
            session: None,
            any_error,
        })
    };
    loop {
        match tokio::time::timeout_at(deadline, t.next_event()).await {
            Err(_) => return answer(None, None),
            Ok(Event::Message { bytes, .. }) => {
                if let Some(r) = response_for(&bytes, id) {
                    return answer(None, Some(r));
                }
            }
            Ok(Event::Refused { ids, status, .. }) if ids.contains(id) => {
                return answer(Some(status), None);
            }
            Ok(Event::Failed { ids, error, .. }) if ids.contains(id) => return Err(error.into()),
            Ok(Event::Closed { ids, .. }) if ids.contains(id) => return answer(None, None),
            Ok(Event::Down { error }) => return Err(error.into()),
            Ok(_) => {}
        }
    }
}

/// After a 401 at the handshake: a newer token, fetched as the challenge says; an error
/// naming what to configure when there are no credentials to fetch one with.
async fn reauthorize(h: &mut HttpTransport, reply: &Reply) -> Result<(), McpError> {
    let challenge = reply.challenge.as_deref().and_then(Challenge::parse);
    let Some(auth) = h.credentials().cloned() else {
        return Err(McpError::Auth(format!(
            "the target requires authorization (HTTP 401{}); give credentials: [target.auth] \
             in the profile, or --bearer-env / --oauth-client-id-env (docs/profiles.md)",
            challenge
                .as_ref()
                .and_then(|c| c.resource_metadata.as_deref())
                .map(|m| format!(", resource metadata at {m}"))
                .unwrap_or_default()
        )));
    };
    auth.renew(h.token(), challenge)
        .await
        .map_err(McpError::Auth)
}

/// What a 401's challenge said, for an error message.
fn challenge_said(reply: &Reply) -> String {
    match reply.challenge.as_deref().and_then(Challenge::parse) {
        Some(Challenge {
            error: Some(e),
            scope,
            ..
        }) => format!(
            " ({e}{})",
            scope.map(|s| format!(", scope {s:?}")).unwrap_or_default()
        ),
        _ => String::new(),
    }
}

/// The response to `id` in one JSON text (a message or a batch), if it holds one.
pub(crate) fn response_for(bytes: &[u8], id: &Id) -> Option<Value> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let matches = |m: &Value| {
        m.get("method").is_none()
            && m.get("id")
                .and_then(|i| serde_json::from_value::<Id>(i.clone()).ok())
                .as_ref()
                == Some(id)
    };
    match v {
        Value::Array(members) => members.into_iter().find(matches),
        m if matches(&m) => Some(m),
        _ => None,
    }
}

/// `(code, message)` of an error response.
pub(crate) fn rpc_error(response: &Value) -> Option<(i64, String)> {
    let e = response.get("error")?;
    Some((
        e.get("code").and_then(Value::as_i64).unwrap_or(0),
        e.get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::modern_meta;

    #[test]
    fn responses_are_found_by_id_in_messages_and_batches() {
        let id = Id::Str("mcpload-initialize".into());
        let one = br#"{"jsonrpc":"2.0","id":"mcpload-initialize","result":{"x":1}}"#;
        assert_eq!(response_for(one, &id).unwrap()["result"]["x"], 1);
        let batch = br#"[{"jsonrpc":"2.0","id":3,"result":{}},{"jsonrpc":"2.0","id":"mcpload-initialize","error":{"code":-1,"message":"no"}}]"#;
        let r = response_for(batch, &id).unwrap();
        assert_eq!(rpc_error(&r), Some((-1, "no".into())));
        let request = br#"{"jsonrpc":"2.0","id":"mcpload-initialize","method":"ping"}"#;
        assert!(response_for(request, &id).is_none());
        assert!(response_for(b"garbage", &id).is_none());
    }

    #[test]
    fn the_pool_splits_evenly_among_the_transports() {
        let shares: Vec<usize> = (0..4).map(|k| share(64, k, 3)).collect();
        // The fourth transport made takes the first share again.
        assert_eq!(shares, [22, 21, 21, 22]);
        assert_eq!(share(8, 0, 1), 8);
    }

    #[test]
    fn modern_meta_names_the_revision() {
        assert_eq!(
            modern_meta()["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
    }
}
