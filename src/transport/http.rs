//! Streamable HTTP: one POST per message or batch, answered by one JSON body or an SSE stream
//! read incrementally; every exchange in flight is a stream polled by the owning worker task
//! (no task per request, no channel). Legacy sessions are echoed and re-initialized on 404;
//! 2026-07-28 requests carry `Mcp-Method` / `Mcp-Name`, and a cancel closes their stream.

use super::h1::{H1Conn, content_kind, retry_after_seconds};
use super::sse::{SseEvent, SseParser};
use super::{
    BodyKind, CancelStyle, Event, ExchangeId, McpHeaders, Outgoing, Transport, TransportCounters,
    TransportError, Unreadable, cancel_notification,
};
use crate::jsonrpc::Id;
use crate::metrics::Counters;
use crate::protocol::headers;
use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::stream::{AbortHandle, Abortable, BoxStream, SelectAll};
use futures_util::{FutureExt, StreamExt};
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as _, Incoming};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

const SESSION_HEADER: HeaderName = HeaderName::from_static(headers::SESSION_ID);
const VERSION_HEADER: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);
const METHOD_HEADER: HeaderName = HeaderName::from_static(headers::METHOD);
const NAME_HEADER: HeaderName = HeaderName::from_static(headers::NAME);
/// Headers an own connection writes per request, never from the custom headers' prefix.
const SET_PER_REQUEST: [HeaderName; 3] = [CONTENT_LENGTH, METHOD_HEADER, NAME_HEADER];

/// How the HTTP client is built.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Idle connections kept per host: size it to the requests in flight, so a steady load
    /// never reconnects.
    pub pool_size: usize,
    /// Headers sent on every request (custom headers, already expanded). Values are marked
    /// sensitive so they never show in debug output.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Largest JSON body or SSE event accepted; a larger one is dropped and counted.
    pub max_message_bytes: usize,
    pub connect_timeout: Duration,
    /// Longest an exchange may stay open (request, answer and stream); `None`: unbounded.
    pub exchange_timeout: Option<Duration>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            pool_size: 64,
            headers: Vec::new(),
            max_message_bytes: 16 << 20,
            connect_timeout: Duration::from_secs(10),
            exchange_timeout: None,
        }
    }
}

/// The shared HTTP client: one hyper connection pool and the headers every request carries.
/// Cloning shares the pool.
#[derive(Clone)]
pub struct HttpClient {
    pool: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `Accept`, `Content-Type` and the custom headers (values marked sensitive).
    base: Arc<HeaderMap>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Custom headers may hold secrets: only their number is shown.
        f.debug_struct("HttpClient")
            .field("headers", &self.base.len())
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A request to `uri` with the base headers and each `extra` header that is set. Built
    /// from parts already parsed: no URL parsing, no header map cloned.
    fn request(
        &self,
        method: Method,
        uri: &Uri,
        body: Bytes,
        extra: [(HeaderName, Option<&HeaderValue>); 5],
    ) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = uri.clone();
        let headers = req.headers_mut();
        headers.reserve(self.base.len() + extra.len());
        for (k, v) in self.base.iter() {
            headers.append(k.clone(), v.clone());
        }
        for (k, v) in extra {
            if let Some(v) = v {
                headers.insert(k, v.clone());
            }
        }
        req
    }

    fn send(&self, req: Request<Full<Bytes>>) -> ResponseFuture {
        self.pool.request(req)
    }
}

/// Builds the shared HTTP client: hyper's pooled client, rustls (ring) with the platform's
/// roots, HTTP/1.1 and h2 by ALPN, no proxy (a proxy would be measured too), Nagle off.
pub fn build_client(opts: &HttpOptions) -> Result<HttpClient, TransportError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::Invalid(format!("TLS setup: {e}")))?
        .with_platform_verifier()
        .map_err(|e| TransportError::Invalid(format!("TLS roots: {e}")))?
        .with_no_client_auth();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(opts.connect_timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(tcp);
    let pool = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(opts.pool_size.max(1))
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_timer(TokioTimer::new())
        .build(connector);
    let mut base = HeaderMap::new();
    base.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    base.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (k, v) in &opts.headers {
        let mut v = v.clone();
        v.set_sensitive(true);
        base.insert(k.clone(), v);
    }
    Ok(HttpClient {
        pool,
        base: Arc::new(base),
    })
}

/// A transport failure from the client (before the answer's head) or from the body.
fn transport_error(e: &(dyn std::error::Error + 'static), connect: bool) -> TransportError {
    // The chain carries the useful part (refused, reset, certificate); the outer message
    // alone often says only "client error".
    let mut msg = e.to_string();
    let mut timed_out = false;
    let mut src = Some(e);
    while let Some(s) = src {
        if !std::ptr::addr_eq(s, e) {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
        }
        timed_out |= s
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || s.downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_timeout);
        src = s.source();
    }
    if timed_out {
        TransportError::Timeout(msg)
    } else if connect {
        TransportError::Connect(msg)
    } else {
        TransportError::Request(msg)
    }
}

fn client_error(e: &hyper_util::client::legacy::Error) -> TransportError {
    transport_error(e, e.is_connect())
}

fn body_error(e: &hyper::Error) -> TransportError {
    transport_error(e, false)
}

fn too_slow() -> TransportError {
    TransportError::Timeout("the exchange outlasted its time limit".into())
}

/// Awaits `f`, bounded by `deadline` when there is one.
async fn within<F: Future>(
    deadline: Option<tokio::time::Instant>,
    f: F,
) -> Result<F::Output, TransportError> {
    match deadline {
        None => Ok(f.await),
        Some(d) => tokio::time::timeout_at(d, f).await.map_err(|_| too_slow()),
    }
}

/// The two POSTs that (re)open a legacy session.
#[derive(Clone, Debug)]
pub struct LegacyInit {
    pub initialize: Bytes,
    pub initialized: Bytes,
}

/// One whole HTTP answer, read to its end (handshakes and probes).
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: BodyKind,
    pub content_type: Option<String>,
    pub session_id: Option<HeaderValue>,
    pub retry_after_s: Option<u64>,
    /// Every JSON text of the body, with the instant it was parsed.
    pub messages: Vec<(Instant, Bytes)>,
    pub unreadable: Vec<Unreadable>,
    /// The body broke off (reset, timeout) after the head.
    pub broken: Option<TransportError>,
}

/// The Streamable HTTP transport. See [`super::Transport`].
pub struct HttpTransport {
    client: HttpClient,
    url: Uri,
    /// `Host`, built once (hyper would format it on every request).
    host: Option<HeaderValue>,
    max_message_bytes: usize,
    exchange_timeout: Option<Duration>,
    protocol_version: Option<HeaderValue>,
    session: Option<HeaderValue>,
    /// Bumped when the session is replaced; a 404 from an older session is no news.
    generation: u64,
    legacy_init: Option<Arc<LegacyInit>>,
    restarting: bool,
    held: Vec<(ExchangeId, Outgoing)>,
    cancel_style: CancelStyle,
    /// Abort handles of single-request exchanges, by request id (`CloseStream` only).
    streams: FxHashMap<Id, (ExchangeId, AbortHandle)>,
    exchanges: SelectAll<Flow>,
    /// The transport's own HTTP/1.1 connections (`http://` targets); `None`: the pool.
    direct: Option<Conns>,
    open: usize,
    next_exchange: u64,
    ready: VecDeque<Event>,
    counters: TransportCounters,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Headers may hold secrets: only the shape is shown.
        f.debug_struct("HttpTransport")
            .field("url", &self.url)
            .field("session", &self.session.is_some())
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

/// The HTTP/1.1 connections a transport owns for an `http://` target, so a request skips
/// the shared pool (its lookups, locks, connection task and channels): a request takes an
/// idle connection or opens one, up to `cap`, else waits in `waiting`.
struct Conns {
    dial: Dial,
    /// The request target in origin form (`/path?query`).
    path: String,
    /// Every request's head up to the per-request headers: the request line, `Host`, the
    /// base headers, the protocol version and the session. Re-encoded when those change.
    prefix: Vec<u8>,
    /// Custom `Mcp-Method` / `Mcp-Name` headers, sent when a request carries none of its own.
    custom_method: Option<HeaderValue>,
    custom_name: Option<HeaderValue>,
    cap: usize,
    /// Connections open or opening, idle or not.
    live: usize,
    idle: Vec<H1Conn>,
    waiting: VecDeque<(ExchangeId, Outgoing, tokio::time::Instant)>,
}

impl Conns {
    fn for_url(url: &Uri, opts: &HttpOptions) -> Option<Self> {
        if url.scheme_str() != Some("http") {
            return None;
        }
        let host = url.host()?;
        // An IPv6 literal comes bracketed in the URL.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let path = url.path_and_query().map_or("/", |p| p.as_str());
        Some(Conns {
            dial: Dial {
                host: host.into(),
                port: url.port_u16().unwrap_or(80),
                timeout: opts.connect_timeout,
            },
            path: path.into(),
            prefix: Vec::new(),
            custom_method: None,
            custom_name: None,
            cap: opts.pool_size.max(1),
            live: 0,
            idle: Vec::new(),
            waiting: VecDeque::new(),
        })
    }

    /// A connection for the next request: `Some(Some(_))` an idle one, `Some(None)` one to
    /// open, `None` none free.
    fn take(&mut self) -> Option<Option<H1Conn>> {
        while let Some(mut conn) = self.idle.pop() {
            if conn.reusable() {
                return Some(Some(conn));
            }
            self.live -= 1;
        }
        (self.live < self.cap).then(|| {
            self.live += 1;
            None
        })
    }

    /// Writes a whole request: the prefix, the per-request headers, the body.
    fn encode(&self, headers: &McpHeaders, body: &[u8], w: &mut Vec<u8>) {
        w.extend_from_slice(&self.prefix);
        let per_request = [
            (
                &METHOD_HEADER,
                headers.method.as_ref().or(self.custom_method.as_ref()),
            ),
            (
                &NAME_HEADER,
                headers.name.as_ref().or(self.custom_name.as_ref()),
            ),
        ];
        for (name, value) in per_request {
            if let Some(v) = value {
                push_header(w, name.as_str(), v.as_bytes());
            }
        }
        push_header(
            w,
            "content-length",
            itoa::Buffer::new().format(body.len()).as_bytes(),
        );
        w.extend_from_slice(b"\r\n");
        w.extend_from_slice(body);
    }

    fn reset(&mut self) {
        self.live = 0;
        self.idle.clear();
        self.waiting.clear();
    }
}

fn push_header(w: &mut Vec<u8>, name: &str, value: &[u8]) {
    w.extend_from_slice(name.as_bytes());
    w.extend_from_slice(b": ");
    w.extend_from_slice(value);
    w.extend_from_slice(b"\r\n");
}

/// Where and how to open a connection.
#[derive(Clone)]
struct Dial {
    host: Arc<str>,
    port: u16,
    timeout: Duration,
}

impl Dial {
    /// Opens a connection and starts `request` on it.
    async fn open(self, request: Vec<u8>) -> Result<H1Conn, TransportError> {
        let mut conn = H1Conn::connect(&self.host, self.port, self.timeout).await?;
        conn.start(|w| *w = request);
        Ok(conn)
    }
}

/// What an exchange stream yields to the transport.
enum Item {
    Event {
        event: Event,
        generation: u64,
    },
    SessionReady(Result<HeaderValue, TransportError>),
    /// An own connection is free again: ready for the next request, or gone (`None`). Its
    /// exchange's answer has been read, so the exchange can no longer be closed to cancel.
    Conn {
        back: Option<H1Conn>,
        closable: Option<(Id, ExchangeId)>,
    },
}

impl HttpTransport {
    pub fn new(client: HttpClient, url: Uri, opts: &HttpOptions) -> Self {
        let host = url.host().and_then(|h| {
            HeaderValue::from_str(&match url.port_u16() {
                Some(port) => format!("{h}:{port}"),
                None => h.to_owned(),
            })
            .ok()
        });
        let direct = Conns::for_url(&url, opts);
        let mut t = HttpTransport {
            client,
            url,
            host,
            max_message_bytes: opts.max_message_bytes,
            exchange_timeout: opts.exchange_timeout,
            protocol_version: None,
            session: None,
            generation: 0,
            legacy_init: None,
            restarting: false,
            held: Vec::new(),
            cancel_style: CancelStyle::Notify,
            streams: FxHashMap::default(),
            exchanges: SelectAll::new(),
            direct,
            open: 0,
            next_exchange: 0,
            ready: VecDeque::new(),
            counters: TransportCounters::default(),
        };
        t.encode_prefix();
        t
    }

    /// Re-encodes the head every request on an own connection starts with.
    fn encode_prefix(&mut self) {
        let Some(conns) = &mut self.direct else {
            return;
        };
        let w = &mut conns.prefix;
        w.clear();
        w.extend_from_slice(b"POST ");
        w.extend_from_slice(conns.path.as_bytes());
        w.extend_from_slice(b" HTTP/1.1\r\n");
        // The headers mcpload sets win over custom headers of the same name, as on the pool.
        let custom: &HeaderMap = &self.client.base;
        let ours = [
            (&HOST, self.host.as_ref()),
            (&VERSION_HEADER, self.protocol_version.as_ref()),
            (&SESSION_HEADER, self.session.as_ref()),
        ];
        for (name, value) in ours {
            if let Some(v) = value.or_else(|| custom.get(name)) {
                push_header(w, name.as_str(), v.as_bytes());
            }
        }
        for (name, value) in custom {
            if !SET_PER_REQUEST.contains(name) && !ours.iter().any(|(n, _)| *n == name) {
                push_header(w, name.as_str(), value.as_bytes());
            }
        }
        conns.custom_method = custom.get(METHOD_HEADER).cloned();
        conns.custom_name = custom.get(NAME_HEADER).cloned();
    }

    pub fn url(&self) -> &Uri {
        &self.url
    }

    /// The `MCP-Protocol-Version` header sent on every request (`None`: not sent).
    pub fn set_protocol_version(&mut self, version: Option<&str>) {
        self.protocol_version = version.and_then(|v| HeaderValue::from_str(v).ok());
        self.encode_prefix();
    }

    /// The session id echoed on every request.
    pub fn set_session(&mut self, session: Option<HeaderValue>) {
        self.session = session;
        self.generation += 1;
        self.encode_prefix();
    }

    pub fn session(&self) -> Option<&HeaderValue> {
        self.session.as_ref()
    }

    /// Enables re-initialization when the server answers 404 for the session.
    pub fn set_legacy_init(&mut self, init: LegacyInit) {
        self.legacy_init = Some(Arc::new(init));
    }

    pub fn set_cancel_style(&mut self, style: CancelStyle) {
        self.cancel_style = style;
    }

    /// A POST to `uri` with the session, version and era headers.
    fn request(&self, uri: &Uri, body: Bytes, headers: &McpHeaders) -> Request<Full<Bytes>> {
        self.client.request(
            Method::POST,
            uri,
            body,
            [
                (HOST, self.host.as_ref()),
                (VERSION_HEADER, self.protocol_version.as_ref()),
                (SESSION_HEADER, self.session.as_ref()),
                (METHOD_HEADER, headers.method.as_ref()),
                (NAME_HEADER, headers.name.as_ref()),
            ],
        )
    }

    /// Sends a POST, on the pool or on a connection of the transport's own; with every own
    /// connection busy it waits its turn. Its time limit runs from `since`.
    fn launch(&mut self, exchange: ExchangeId, out: Outgoing, since: tokio::time::Instant) {
        let (phase, owed) = match &mut self.direct {
            None => {
                let sent = self
                    .client
                    .send(self.request(&self.url, out.body, &out.headers));
                (Phase::Pooled(sent), Owed::Nothing)
            }
            Some(conns) => match conns.take() {
                None => {
                    conns.waiting.push_back((exchange, out, since));
                    return;
                }
                Some(Some(mut conn)) => {
                    conn.start(|w| conns.encode(&out.headers, &out.body, w));
                    (Phase::Head(conn), Owed::Lost)
                }
                Some(None) => {
                    let mut request = Vec::new();
                    conns.encode(&out.headers, &out.body, &mut request);
                    let dial = conns.dial.clone().open(request);
                    (Phase::Dialing(Box::pin(dial)), Owed::Lost)
                }
            },
        };
        // A single request's stream is closed to cancel it (2026-07-28).
        let closable = (matches!(self.cancel_style, CancelStyle::CloseStream)
            && !out.batch
            && out.ids.len() == 1)
            .then(|| out.ids[0].clone());
        let ex = Box::new(Exchange {
            st: ExchangeState {
                meta: Meta {
                    exchange,
                    ids: out.ids,
                    batch: out.batch,
                },
                queue: VecDeque::new(),
                answered_array: false,
                error_code: None,
            },
            phase,
            timer: self
                .exchange_timeout
                .map(|t| Box::pin(tokio::time::sleep_until(since + t))),
            owed,
            closable: closable.clone(),
            generation: self.generation,
            max: self.max_message_bytes,
        });
        match closable {
            Some(id) => {
                let (handle, reg) = AbortHandle::new_pair();
                self.streams.insert(id, (exchange, handle));
                self.exchanges
                    .push(Flow::Abortable(Abortable::new(ex, reg)));
            }
            None => self.exchanges.push(Flow::Plain(ex)),
        }
    }

    /// Posts a message nobody waits for (a cancel notification); its answer is dropped.
    fn post_quietly(&mut self, body: Bytes) {
        let fut = self
            .client
            .send(self.request(&self.url, body, &McpHeaders::default()));
        self.exchanges.push(Flow::Other(
            futures_util::stream::once(fut)
                .filter_map(|_| std::future::ready(None::<Item>))
                .boxed(),
        ));
    }

    /// Sends one POST outside the event machinery and reads its whole answer: for
    /// handshakes, discovery and probes, where status and headers are the evidence.
    pub async fn post_once(
        &self,
        body: Bytes,
        headers: &McpHeaders,
        timeout: Duration,
    ) -> Result<Reply, TransportError> {
        let sent = self.client.send(self.request(&self.url, body, headers));
        within(
            Some(tokio::time::Instant::now() + timeout),
            read_reply(sent, self.max_message_bytes),
        )
        .await?
    }

    fn start_restart(&mut self) {
        let Some(init) = self.legacy_init.clone() else {
            return;
        };
        self.restarting = true;
        let client = self.client.clone();
        let url = self.url.clone();
        let host = self.host.clone();
        let version = self.protocol_version.clone();
        let max = self.max_message_bytes;
        let fut = async move { reinitialize(client, url, host, version, &init, max).await };
        self.exchanges.push(Flow::Other(
            fut.into_stream().map(Item::SessionReady).boxed(),
        ));
    }

    fn on_session_ready(&mut self, result: Result<HeaderValue, TransportError>) {
        self.restarting = false;
        match result {
            Ok(session) => {
                self.set_session(Some(session));
                self.counters.session_restarts += 1;
                let now = tokio::time::Instant::now();
                for (ex, out) in std::mem::take(&mut self.held) {
                    self.launch(ex, out, now);
                }
            }
            Err(error) => {
                for (ex, out) in std::mem::take(&mut self.held) {
                    self.open -= 1;
                    self.ready.push_back(Event::Failed {
                        exchange: Some(ex),
                        ids: out.ids,
                        error: error.clone(),
                    });
                }
            }
        }
    }

    /// Drops `exchange`'s entry among the streams that can be closed to cancel (the id may
    /// already belong to a newer exchange, once answered).
    fn forget_stream(&mut self, id: &Id, exchange: ExchangeId) {
        if self.streams.get(id).is_some_and(|(ex, _)| *ex == exchange) {
            self.streams.remove(id);
        }
    }

    /// An own connection came back (or closed): it serves the longest-waiting request.
    fn on_conn(&mut self, back: Option<H1Conn>) {
        let Some(conns) = &mut self.direct else {
            return;
        };
        match back {
            Some(conn) => conns.idle.push(conn),
            None => conns.live -= 1,
        }
        if let Some((ex, out, since)) = conns.waiting.pop_front() {
            self.launch(ex, out, since);
        }
    }

    /// Bookkeeping for an event about to be handed over.
    fn on_event(&mut self, event: &Event, generation: u64) {
        let (exchange, ids, status) = match event {
            Event::Closed { exchange, ids, .. } => (Some(*exchange), ids, None),
            Event::Failed { exchange, ids, .. } => (*exchange, ids, None),
            Event::Refused {
                exchange,
                ids,
                status,
                ..
            } => (Some(*exchange), ids, Some(*status)),
            _ => return,
        };
        self.open -= 1;
        if let Some(exchange) = exchange {
            for id in ids {
                self.forget_stream(id, exchange);
            }
        }
        if status == Some(404)
            && self.legacy_init.is_some()
            && self.session.is_some()
            && generation == self.generation
            && !self.restarting
        {
            self.start_restart();
        }
    }
}

impl Transport for HttpTransport {
    fn send(&mut self, out: Outgoing) -> ExchangeId {
        let ex = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        self.open += 1;
        if self.restarting {
            self.held.push((ex, out));
        } else {
            self.launch(ex, out, tokio::time::Instant::now());
        }
        ex
    }

    fn cancel(&mut self, id: &Id) {
        match self.cancel_style {
            CancelStyle::CloseStream => {
                if let Some((_, handle)) = self.streams.remove(id) {
                    handle.abort();
                    self.open -= 1;
                    // Its connection goes with it (an answer left half read).
                    self.on_conn(None);
                } else if let Some(conns) = &mut self.direct
                    && let Some(at) = conns.waiting.iter().position(|(_, out, _)| {
                        !out.batch && out.ids.len() == 1 && out.ids[0] == *id
                    })
                {
                    conns.waiting.remove(at);
                    self.open -= 1;
                }
            }
            CancelStyle::Notify => self.post_quietly(cancel_notification(id)),
        }
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Poll::Ready(ev);
            }
            match self.exchanges.poll_next_unpin(cx) {
                Poll::Ready(Some(Item::Event { event, generation })) => {
                    self.on_event(&event, generation);
                    return Poll::Ready(event);
                }
                Poll::Ready(Some(Item::SessionReady(r))) => self.on_session_ready(r),
                Poll::Ready(Some(Item::Conn { back, closable })) => {
                    if let Some((id, exchange)) = closable {
                        self.forget_stream(&id, exchange);
                    }
                    self.on_conn(back);
                }
                // Nothing in flight: new sends are polled on the next call.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn open_exchanges(&self) -> usize {
        self.open
    }

    fn take_counters(&mut self, into: &mut Counters) {
        self.counters.drain_into(into);
    }

    async fn close(&mut self) {
        self.exchanges = SelectAll::new();
        if let Some(conns) = &mut self.direct {
            conns.reset();
        }
        self.streams.clear();
        self.open = 0;
        if self.legacy_init.is_none() {
            return;
        }
        if let Some(session) = self.session.take() {
            let req = self.client.request(
                Method::DELETE,
                &self.url,
                Bytes::new(),
                [
                    (HOST, self.host.as_ref()),
                    (SESSION_HEADER, Some(&session)),
                    (VERSION_HEADER, self.protocol_version.as_ref()),
                    (METHOD_HEADER, None),
                    (NAME_HEADER, None),
                ],
            );
            // 200, 204 or 405 (the server does not let clients end sessions): all fine.
            let _ = tokio::time::timeout(Duration::from_secs(5), self.client.send(req)).await;
        }
    }
}

/// What the exchange needs to report its end.
struct Meta {
    exchange: ExchangeId,
    ids: Vec<Id>,
    batch: bool,
}

// An exchange lives in one allocation (its box) whatever its phase; boxing the reader would
// add one per exchange.
#[allow(clippy::large_enum_variant)]
enum Phase {
    /// A request through the shared pool, on its way.
    Pooled(ResponseFuture),
    /// Opening an own connection (the request is started on it once open).
    Dialing(BoxFuture<'static, Result<H1Conn, TransportError>>),
    /// On an own connection: writing the request, reading the answer's head.
    Head(H1Conn),
    Body {
        body: Body,
        status: u16,
        retry_after_s: Option<u64>,
        reader: BodyReader,
    },
    Done,
}

/// Where an answer's body comes from.
enum Body {
    Pooled(Incoming),
    Own(H1Conn),
}

/// What an exchange stream owes its transport's own connections when the exchange ends.
enum Owed {
    /// It went through the pool.
    Nothing,
    /// A connection taken or being opened: it comes back closed (`None`) unless its answer
    /// was read whole.
    Lost,
    /// The connection, its answer read whole and fit to serve again.
    Kept(H1Conn),
    Returned,
}

/// What an exchange has to report, and how.
struct ExchangeState {
    meta: Meta,
    queue: VecDeque<Event>,
    /// A batch's answer held a JSON array (so it was answered, not refused as a whole).
    answered_array: bool,
    /// The code of the single error a refused batch got.
    error_code: Option<i64>,
}

/// One POST and its answer as a stream of events, the terminal one last. Lives in one box
/// from its request to its end, so no state is copied per event.
struct Exchange {
    st: ExchangeState,
    phase: Phase,
    /// The exchange's time limit, if any.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The session generation it was sent in.
    generation: u64,
    max: usize,
    owed: Owed,
    /// The id its stream is closed under to cancel it, if it is.
    closable: Option<Id>,
}

impl Exchange {
    /// Ends the exchange in a transport failure, after what the body held so far. An own
    /// connection goes with it.
    fn fail(&mut self, error: TransportError) {
        let st = &mut self.st;
        if let Phase::Body { reader, status, .. } = std::mem::replace(&mut self.phase, Phase::Done)
        {
            let mut reader = reader;
            reader.finish(Instant::now(), false, &mut |p| st.piece(p, status));
        }
        st.queue.push_back(Event::Failed {
            exchange: Some(st.meta.exchange),
            ids: std::mem::take(&mut st.meta.ids),
            error,
        });
    }

    /// The answer's head came: the body is read next.
    fn on_head(&mut self, status: u16, kind: BodyKind, retry_after_s: Option<u64>, body: Body) {
        self.phase = Phase::Body {
            body,
            status,
            retry_after_s,
            reader: BodyReader::new(kind, self.max),
        };
    }

    /// The body ended whole: an own connection may serve again.
    fn on_body_end(&mut self) {
        let Phase::Body {
            body,
            status,
            retry_after_s,
            mut reader,
        } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return;
        };
        if let Body::Own(conn) = body
            && conn.keeps_alive()
        {
            self.owed = Owed::Kept(conn);
        }
        let st = &mut self.st;
        reader.finish(Instant::now(), status < 400, &mut |p| st.piece(p, status));
        st.finish(status, retry_after_s, reader.kind());
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        loop {
            if let Some(ev) = self.st.queue.pop_front() {
                return Poll::Ready(Some(ev));
            }
            if !matches!(self.phase, Phase::Done)
                && let Some(timer) = &mut self.timer
                && timer.as_mut().poll(cx).is_ready()
            {
                self.fail(too_slow());
                continue;
            }
            match &mut self.phase {
                Phase::Done => return Poll::Ready(None),
                Phase::Pooled(sent) => match std::task::ready!(Pin::new(sent).poll(cx)) {
                    Err(e) => self.fail(client_error(&e)),
                    Ok(resp) => {
                        let headers = resp.headers();
                        let kind = content_kind(headers.get(CONTENT_TYPE).map(|v| v.as_bytes()));
                        let retry_after_s = headers
                            .get(RETRY_AFTER)
                            .and_then(|v| retry_after_seconds(v.as_bytes()));
                        let status = resp.status().as_u16();
                        self.on_head(status, kind, retry_after_s, Body::Pooled(resp.into_body()));
                    }
                },
                Phase::Dialing(dial) => match std::task::ready!(dial.as_mut().poll(cx)) {
                    Err(e) => self.fail(e),
                    Ok(conn) => self.phase = Phase::Head(conn),
                },
                Phase::Head(conn) => match std::task::ready!(conn.poll_head(cx)) {
                    Err(e) => self.fail(e),
                    Ok(head) => {
                        let Phase::Head(conn) = std::mem::replace(&mut self.phase, Phase::Done)
                        else {
                            unreachable!("matched above")
                        };
                        self.on_head(head.status, head.kind, head.retry_after_s, Body::Own(conn));
                    }
                },
                Phase::Body {
                    body,
                    status,
                    reader,
                    ..
                } => {
                    let status = *status;
                    let st = &mut self.st;
                    let mut more = true;
                    let mut feed = |chunk: &[u8]| {
                        more = reader.feed(chunk, Instant::now(), &mut |p| st.piece(p, status));
                    };
                    let read = match body {
                        Body::Own(conn) => std::task::ready!(conn.poll_body(cx, &mut feed)),
                        Body::Pooled(body) => {
                            match std::task::ready!(Pin::new(body).poll_frame(cx)) {
                                None => Ok(false),
                                Some(Err(e)) => Err(body_error(&e)),
                                Some(Ok(frame)) => {
                                    if let Ok(chunk) = frame.into_data() {
                                        feed(&chunk);
                                    }
                                    Ok(true) // trailers are skipped
                                }
                            }
                        }
                    };
                    match read {
                        Err(e) => self.fail(e),
                        Ok(false) => self.on_body_end(),
                        // A JSON or unknown body past the bound: the rest is not read.
                        Ok(true) if !more => {
                            let Phase::Body {
                                reader,
                                retry_after_s,
                                ..
                            } = std::mem::replace(&mut self.phase, Phase::Done)
                            else {
                                unreachable!("matched above")
                            };
                            self.st.finish(status, retry_after_s, reader.kind());
                        }
                        Ok(true) => {}
                    }
                }
            }
        }
    }

    /// Hands back an own connection once the exchange is over: with the connection if its
    /// answer was read whole, without if it closed; `None` when there is nothing to hand back.
    fn release(&mut self) -> Option<Item> {
        let back = match std::mem::replace(&mut self.owed, Owed::Returned) {
            Owed::Nothing => {
                self.owed = Owed::Nothing;
                return None;
            }
            Owed::Returned => return None,
            Owed::Lost => None,
            Owed::Kept(conn) => Some(conn),
        };
        let exchange = self.st.meta.exchange;
        let closable = self.closable.take().map(|id| (id, exchange));
        Some(Item::Conn { back, closable })
    }
}

impl futures_util::Stream for Exchange {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        match std::task::ready!(this.poll_event(cx)) {
            Some(event) => {
                // The connection goes back as soon as the answer is read, before any of its
                // events: the response pairs its request, and the request the worker sends in
                // its place must find the connection idle rather than open another.
                if matches!(this.phase, Phase::Done)
                    && let Some(conn) = this.release()
                {
                    this.st.queue.push_front(event);
                    return Poll::Ready(Some(conn));
                }
                let generation = this.generation;
                Poll::Ready(Some(Item::Event { event, generation }))
            }
            None => Poll::Ready(this.release()),
        }
    }
}

/// Anything in flight on the transport: an exchange (abortable when its stream may be
/// closed to cancel), or a rare side task (a quiet POST, a session restart). Exchanges are
/// boxed: `SelectAll` moves a stream into a new task after each item it yields.
enum Flow {
    Plain(Box<Exchange>),
    Abortable(Abortable<Box<Exchange>>),
    Other(BoxStream<'static, Item>),
}

impl futures_util::Stream for Flow {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        match self.get_mut() {
            Flow::Plain(s) => s.poll_next_unpin(cx),
            Flow::Abortable(s) => s.poll_next_unpin(cx),
            Flow::Other(s) => s.poll_next_unpin(cx),
        }
    }
}

impl ExchangeState {
    fn piece(&mut self, p: Piece, status: u16) {
        let exchange = Some(self.meta.exchange);
        match p {
            Piece::Message(at, bytes) => {
                if self.meta.batch && status >= 400 {
                    if !starts_array(&bytes) {
                        // The server's one answer to a batch it refused: the refusal itself.
                        self.error_code = self.error_code.or_else(|| error_code(&bytes));
                        return;
                    }
                    self.answered_array = true;
                }
                self.queue.push_back(Event::Message {
                    exchange,
                    batch: self.meta.batch,
                    at,
                    bytes,
                });
            }
            Piece::Unreadable(at, why) => {
                self.queue
                    .push_back(Event::Unreadable { exchange, at, why })
            }
        }
    }

    fn finish(&mut self, status: u16, retry_after_s: Option<u64>, body: BodyKind) {
        let ids = std::mem::take(&mut self.meta.ids);
        let exchange = self.meta.exchange;
        let batch = self.meta.batch;
        self.queue.push_back(if status >= 400 {
            Event::Refused {
                exchange,
                ids,
                batch,
                status,
                retry_after_s,
                batch_rejected: batch && !self.answered_array,
                error_code: self.error_code,
            }
        } else {
            Event::Closed {
                exchange,
                ids,
                batch,
                status,
                body,
            }
        });
    }
}

fn starts_array(b: &[u8]) -> bool {
    b.iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'[')
}

/// The `error.code` of a single error object, if it is one.
fn error_code(b: &[u8]) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct E {
        error: C,
    }
    #[derive(serde::Deserialize)]
    struct C {
        code: i64,
    }
    serde_json::from_slice::<E>(b).ok().map(|e| e.error.code)
}

/// A JSON text or a failure to get one, from a body.
enum Piece {
    Message(Instant, Bytes),
    Unreadable(Instant, Unreadable),
}

/// Turns body chunks into JSON texts according to the content type, within the size bound.
struct BodyReader {
    kind: BodyKind,
    sse: Option<SseParser>,
    json: BytesMut,
    seen: usize,
    max: usize,
    last_at: Option<Instant>,
}

impl BodyReader {
    /// A reader for a body of the kind its `Content-Type` announced.
    fn new(kind: BodyKind, max: usize) -> Self {
        BodyReader {
            kind,
            sse: (kind == BodyKind::Sse).then(|| SseParser::new(max)),
            json: BytesMut::new(),
            seen: 0,
            max,
            last_at: None,
        }
    }

    /// The kind of body read so far (`Empty` when no byte came).
    fn kind(&self) -> BodyKind {
        if self.seen == 0 {
            BodyKind::Empty
        } else {
            self.kind
        }
    }

    /// Feeds one chunk. Returns false when the rest of the body is not worth reading (a
    /// JSON or unknown body past the bound): the caller drops the connection.
    fn feed(&mut self, chunk: &[u8], at: Instant, out: &mut impl FnMut(Piece)) -> bool {
        self.seen += chunk.len();
        self.last_at = Some(at);
        match &mut self.sse {
            Some(p) => {
                p.feed(chunk, |e| match e {
                    SseEvent::Data(b) => out(Piece::Message(at, b)),
                    SseEvent::Oversized => out(Piece::Unreadable(at, Unreadable::TooLarge)),
                });
                true
            }
            None if self.seen > self.max => {
                self.json.clear();
                if self.kind == BodyKind::Json {
                    out(Piece::Unreadable(at, Unreadable::TooLarge));
                }
                false
            }
            None => {
                if self.kind == BodyKind::Json {
                    self.json.extend_from_slice(chunk);
                }
                true
            }
        }
    }

    /// The body ended (or broke off). `other_is_unreadable`: a non-empty body of another
    /// content type counts as unreadable (a success answer that carries no JSON-RPC).
    fn finish(&mut self, at: Instant, other_is_unreadable: bool, out: &mut impl FnMut(Piece)) {
        if let Some(p) = &mut self.sse {
            if p.finish() {
                out(Piece::Unreadable(at, Unreadable::Truncated));
            }
            return;
        }
        if self.kind == BodyKind::Json && !self.json.is_empty() {
            let body = self.json.split().freeze();
            if body.iter().any(|b| !b.is_ascii_whitespace()) {
                out(Piece::Message(self.last_at.unwrap_or(at), body));
            }
        } else if self.kind == BodyKind::Other && self.seen > 0 && other_is_unreadable {
            out(Piece::Unreadable(at, Unreadable::UnexpectedContentType));
        }
    }
}

/// The next data chunk of a body (trailers skipped); `None` at its end.
async fn next_chunk(body: &mut Incoming) -> Result<Option<Bytes>, TransportError> {
    loop {
        match body.frame().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(body_error(&e)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// Awaits a sent request and reads the whole answer.
async fn read_reply(sent: ResponseFuture, max: usize) -> Result<Reply, TransportError> {
    let resp = sent.await.map_err(|e| client_error(&e))?;
    let status = resp.status().as_u16();
    let headers = resp.headers();
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let session_id = headers.get(SESSION_HEADER).cloned();
    let retry_after_s = headers
        .get(RETRY_AFTER)
        .and_then(|v| retry_after_seconds(v.as_bytes()));
    let kind = content_kind(headers.get(CONTENT_TYPE).map(|v| v.as_bytes()));
    let mut reader = BodyReader::new(kind, max);
    let mut body = resp.into_body();
    let mut messages = Vec::new();
    let mut unreadable = Vec::new();
    let mut sink = |p: Piece| match p {
        Piece::Message(at, b) => messages.push((at, b)),
        Piece::Unreadable(_, why) => unreadable.push(why),
    };
    let mut broken = None;
    loop {
        match next_chunk(&mut body).await {
            Ok(Some(chunk)) => {
                if !reader.feed(&chunk, Instant::now(), &mut sink) {
                    break;
                }
            }
            Ok(None) => {
                reader.finish(Instant::now(), status < 400, &mut sink);
                break;
            }
            Err(e) => {
                reader.finish(Instant::now(), false, &mut sink);
                broken = Some(e);
                break;
            }
        }
    }
    Ok(Reply {
        status,
        body: reader.kind(),
        content_type,
        session_id,
        retry_after_s,
        messages,
        unreadable,
        broken,
    })
}

/// Opens a new legacy session: `initialize`, then `notifications/initialized`.
async fn reinitialize(
    client: HttpClient,
    url: Uri,
    host: Option<HeaderValue>,
    version: Option<HeaderValue>,
    init: &LegacyInit,
    max: usize,
) -> Result<HeaderValue, TransportError> {
    let post = |body: &Bytes, session: Option<&HeaderValue>| {
        let req = client.request(
            Method::POST,
            &url,
            body.clone(),
            [
                (HOST, host.as_ref()),
                (VERSION_HEADER, version.as_ref()),
                (SESSION_HEADER, session),
                (METHOD_HEADER, None),
                (NAME_HEADER, None),
            ],
        );
        client.send(req)
    };
    let deadline = Some(tokio::time::Instant::now() + Duration::from_secs(30));
    let reply = within(deadline, read_reply(post(&init.initialize, None), max)).await??;
    if reply.status >= 400 {
        return Err(TransportError::Session(format!(
            "initialize answered HTTP {}",
            reply.status
        )));
    }
    let session = reply
        .session_id
        .ok_or_else(|| TransportError::Session("initialize gave no session id".into()))?;
    let deadline = Some(tokio::time::Instant::now() + Duration::from_secs(30));
    let status = within(deadline, post(&init.initialized, Some(&session)))
        .await?
        .map_err(|e| client_error(&e))?
        .status();
    if !status.is_success() {
        return Err(TransportError::Session(format!(
            "notifications/initialized answered HTTP {status}"
        )));
    }
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(ct: &str, chunks: &[&[u8]], max: usize, status: u16) -> (Vec<String>, BodyKind) {
        let mut r = BodyReader::new(content_kind(Some(ct.as_bytes())), max);
        let mut out = Vec::new();
        let mut sink = |p: Piece| {
            out.push(match p {
                Piece::Message(_, b) => String::from_utf8_lossy(&b).into_owned(),
                Piece::Unreadable(_, why) => format!("!{}", why.as_str()),
            })
        };
        let now = Instant::now();
        let mut done = false;
        for c in chunks {
            if !r.feed(c, now, &mut sink) {
                done = true;
                break;
            }
        }
        if !done {
            r.finish(now, status < 400, &mut sink);
        }
        (out, r.kind())
    }

    #[test]
    fn json_bodies_are_one_message_and_bounded() {
        let (m, k) = pieces(
            "application/json; charset=utf-8",
            &[b"{\"id\":", b"1}"],
            64,
            200,
        );
        assert_eq!((m, k), (vec!["{\"id\":1}".to_string()], BodyKind::Json));
        let (m, _) = pieces("application/json", &[&[b' '; 40], &[b' '; 40]], 64, 200);
        assert_eq!(m, vec!["!message larger than the limit".to_string()]);
        let (m, k) = pieces("application/json", &[], 64, 202);
        assert_eq!((m.len(), k), (0, BodyKind::Empty));
    }

    #[test]
    fn sse_bodies_yield_each_event_and_report_truncation() {
        let (m, k) = pieces(
            "text/event-stream",
            &[b"id: 1\ndata: \n\ndata: {\"a\":1}\n\ndata: {\"b\""],
            64,
            200,
        );
        assert_eq!(k, BodyKind::Sse);
        assert_eq!(
            m,
            vec![
                "{\"a\":1}".to_string(),
                "!message cut off by the end of the stream".to_string()
            ]
        );
    }

    #[test]
    fn other_bodies_count_only_on_success() {
        let (m, k) = pieces("text/html", &[b"<html>"], 64, 200);
        assert_eq!((m.len(), k), (1, BodyKind::Other));
        let (m, _) = pieces("text/plain", &[b"Unsupported Media Type"], 64, 415);
        assert!(m.is_empty());
    }

    /// A keep-alive server that counts its connections; a request whose body says `stall`
    /// gets the head and part of a body, then nothing more.
    async fn counting_server() -> (Uri, Arc<std::sync::atomic::AtomicUsize>) {
        use crate::transport::wire_for_tests::read_request;
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some(body) = read_request(&mut sock, &mut buf).await {
                        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
                        let stall = body.windows(5).any(|w| w == b"stall");
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            if stall { 1000 } else { answer.len() }
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock
                            .write_all(if stall { &answer[..10] } else { answer })
                            .await;
                    }
                });
            }
        });
        (url, accepted)
    }

    /// Sends one request and returns its terminal event.
    async fn exchange(t: &mut HttpTransport, body: &'static [u8]) -> Event {
        t.send(Outgoing::single(
            Bytes::from_static(body),
            Some(Id::Num(1)),
            McpHeaders::default(),
        ));
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
                .await
                .expect("an answer or a time-out");
            if matches!(ev, Event::Closed { .. } | Event::Failed { .. }) {
                return ev;
            }
        }
    }

    #[tokio::test]
    async fn a_cancel_after_the_answer_was_read_closes_nothing() {
        let (url, accepted) = counting_server().await;
        let opts = HttpOptions::default();
        let mut t = HttpTransport::new(build_client(&opts).unwrap(), url, &opts);
        t.set_cancel_style(CancelStyle::CloseStream);
        let ping: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let id = Id::Num(1);
        t.send(Outgoing::single(
            Bytes::from_static(ping),
            Some(id.clone()),
            McpHeaders::default(),
        ));
        // The answer is read and its connection back; its events are still to come. A cancel
        // now (its deadline passed before the worker saw the response) has no stream left to
        // close: the connection stays counted once and the exchange ends once.
        let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
            .await
            .unwrap();
        assert!(matches!(ev, Event::Message { .. }), "{ev:?}");
        t.cancel(&id);
        let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
            .await
            .unwrap();
        assert!(matches!(ev, Event::Closed { status: 200, .. }), "{ev:?}");
        assert_eq!(t.open_exchanges(), 0);
        let conns = t.direct.as_ref().unwrap();
        assert_eq!((conns.live, conns.idle.len()), (1, 1));
        assert!(matches!(
            exchange(&mut t, ping).await,
            Event::Closed { status: 200, .. }
        ));
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn own_requests_carry_each_header_once_with_mcploads_first() {
        use http::header::AUTHORIZATION;
        let value = HeaderValue::from_static;
        let opts = HttpOptions {
            headers: vec![
                (HOST, value("example.com")),
                (METHOD_HEADER, value("custom/method")),
                (AUTHORIZATION, value("Bearer x")),
                (CONTENT_LENGTH, value("999")),
            ],
            ..HttpOptions::default()
        };
        let url: Uri = "http://127.0.0.1:9/mcp".parse().unwrap();
        let mut t = HttpTransport::new(build_client(&opts).unwrap(), url, &opts);
        t.set_protocol_version(Some("2026-07-28"));
        t.set_session(Some(value("s-1")));
        let encoded = |t: &HttpTransport, method: Option<HeaderValue>| {
            let mut w = Vec::new();
            let headers = McpHeaders { method, name: None };
            t.direct.as_ref().unwrap().encode(&headers, b"{}", &mut w);
            let mut parsed = [httparse::EMPTY_HEADER; 16];
            let mut req = httparse::Request::new(&mut parsed);
            let head = match req.parse(&w).unwrap() {
                httparse::Status::Complete(n) => n,
                httparse::Status::Partial => panic!("incomplete head"),
            };
            assert_eq!(&w[head..], b"{}");
            req.headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let sent = encoded(&t, Some(value("tools/call")));
        let once = |name: &str| {
            let v: Vec<_> = sent
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect();
            assert_eq!(v.len(), 1, "{name}: {sent:?}");
            v[0].to_owned()
        };
        assert_eq!(once("host"), "127.0.0.1:9");
        assert_eq!(once("mcp-method"), "tools/call");
        assert_eq!(once("content-length"), "2");
        assert_eq!(once("mcp-protocol-version"), "2026-07-28");
        assert_eq!(once("mcp-session-id"), "s-1");
        assert_eq!(once("authorization"), "Bearer x");
        // A request with no method of its own carries the custom one.
        let sent = encoded(&t, None);
        assert!(
            sent.contains(&("mcp-method".into(), "custom/method".into())),
            "{sent:?}"
        );
    }

    #[tokio::test]
    async fn own_connections_are_reused_unless_an_answer_was_abandoned() {
        let (url, accepted) = counting_server().await;
        let opts = HttpOptions {
            exchange_timeout: Some(Duration::from_millis(300)),
            ..HttpOptions::default()
        };
        let mut t = HttpTransport::new(build_client(&opts).unwrap(), url, &opts);
        assert!(
            t.direct.is_some(),
            "http:// targets use the transport's connections"
        );
        let ping: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        for _ in 0..5 {
            assert!(matches!(
                exchange(&mut t, ping).await,
                Event::Closed { status: 200, .. }
            ));
        }
        let seq = std::sync::atomic::Ordering::SeqCst;
        assert_eq!(
            accepted.load(seq),
            1,
            "one keep-alive connection serves them all"
        );
        let stall: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"stall"}"#;
        let ev = exchange(&mut t, stall).await;
        assert!(
            matches!(
                ev,
                Event::Failed {
                    error: TransportError::Timeout(_),
                    ..
                }
            ),
            "{ev:?}"
        );
        // The half-read connection is closed; the next request opens a fresh one.
        for _ in 0..3 {
            assert!(matches!(
                exchange(&mut t, ping).await,
                Event::Closed { status: 200, .. }
            ));
        }
        assert_eq!(accepted.load(seq), 2);
        assert_eq!(t.open_exchanges(), 0);
    }

    #[tokio::test]
    async fn an_exchange_past_its_time_limit_fails_as_a_timeout() {
        // A real server that reads the request and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            while tokio::io::AsyncReadExt::read(&mut sock, &mut buf)
                .await
                .unwrap_or(0)
                > 0
            {}
        });
        let opts = HttpOptions {
            exchange_timeout: Some(Duration::from_millis(200)),
            ..HttpOptions::default()
        };
        let url: Uri = format!("http://{addr}/mcp").parse().unwrap();
        let mut t = HttpTransport::new(build_client(&opts).unwrap(), url, &opts);
        let id = Id::Num(1);
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        let ex = t.send(Outgoing::single(
            body,
            Some(id.clone()),
            McpHeaders::default(),
        ));
        let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
            .await
            .expect("the time limit ends the exchange");
        match ev {
            Event::Failed {
                exchange,
                ids,
                error: TransportError::Timeout(_),
            } => assert_eq!((exchange, ids), (Some(ex), vec![id])),
            other => panic!("{other:?}"),
        }
        assert_eq!(t.open_exchanges(), 0);
        server.abort();
    }

    #[test]
    fn a_refused_batch_is_recognised_by_its_single_error() {
        assert!(starts_array(b" [1]"));
        assert!(!starts_array(b"{}"));
        assert_eq!(
            error_code(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}"#),
            Some(-32600)
        );
    }
}
