//! Streamable HTTP: one POST per message or batch, answered by one JSON body or an SSE stream
//! read incrementally; every exchange in flight is a stream polled by the owning worker task
//! (no task per request, no channel). Legacy sessions are echoed and re-initialized on 404;
//! 2026-07-28 requests carry `Mcp-Method` / `Mcp-Name`, and a cancel closes their stream.

use super::sse::{SseEvent, SseParser};
use super::{
    BodyKind, CancelStyle, Event, ExchangeId, McpHeaders, Outgoing, Transport, TransportCounters,
    TransportError, Unreadable, cancel_notification,
};
use crate::jsonrpc::Id;
use crate::metrics::Counters;
use bytes::{Bytes, BytesMut};
use futures_util::stream::{AbortHandle, Abortable, BoxStream, SelectAll};
use futures_util::{FutureExt, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

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

/// Builds the shared HTTP client: rustls (ring) with the platform's roots, HTTP/1.1 and h2
/// by ALPN, no proxy (a proxy would be measured too), Nagle off.
pub fn build_client(opts: &HttpOptions) -> Result<reqwest::Client, TransportError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::Invalid(format!("TLS setup: {e}")))?
        .with_platform_verifier()
        .map_err(|e| TransportError::Invalid(format!("TLS roots: {e}")))?
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut headers = HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (k, v) in &opts.headers {
        let mut v = v.clone();
        v.set_sensitive(true);
        headers.insert(k.clone(), v);
    }
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(opts.pool_size.max(1))
        .pool_idle_timeout(Duration::from_secs(90))
        .connect_timeout(opts.connect_timeout)
        .default_headers(headers)
        .build()
        .map_err(|e| TransportError::Invalid(format!("HTTP client: {e}")))
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
    client: reqwest::Client,
    url: reqwest::Url,
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
    exchanges: SelectAll<BoxStream<'static, Item>>,
    open: usize,
    next_exchange: u64,
    ready: VecDeque<Event>,
    counters: TransportCounters,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Headers may hold secrets: only the shape is shown.
        f.debug_struct("HttpTransport")
            .field("url", &self.url.as_str())
            .field("session", &self.session.is_some())
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

/// What an exchange stream yields to the transport.
enum Item {
    Event { event: Event, generation: u64 },
    SessionReady(Result<HeaderValue, TransportError>),
}

impl HttpTransport {
    pub fn new(client: reqwest::Client, url: reqwest::Url, opts: &HttpOptions) -> Self {
        HttpTransport {
            client,
            url,
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
            open: 0,
            next_exchange: 0,
            ready: VecDeque::new(),
            counters: TransportCounters::default(),
        }
    }

    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// The `MCP-Protocol-Version` header sent on every request (`None`: not sent).
    pub fn set_protocol_version(&mut self, version: Option<&str>) {
        self.protocol_version = version.and_then(|v| HeaderValue::from_str(v).ok());
    }

    /// The session id echoed on every request.
    pub fn set_session(&mut self, session: Option<HeaderValue>) {
        self.session = session;
        self.generation += 1;
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

    fn request(&self, body: Bytes, headers: &McpHeaders) -> reqwest::RequestBuilder {
        let mut rb = self.client.post(self.url.clone()).body(body);
        if let Some(v) = &self.protocol_version {
            rb = rb.header(VERSION_HEADER, v.clone());
        }
        if let Some(s) = &self.session {
            rb = rb.header(SESSION_HEADER, s.clone());
        }
        if let Some(m) = &headers.method {
            rb = rb.header(METHOD_HEADER, m.clone());
        }
        if let Some(n) = &headers.name {
            rb = rb.header(NAME_HEADER, n.clone());
        }
        if let Some(t) = self.exchange_timeout {
            rb = rb.timeout(t);
        }
        rb
    }

    fn launch(&mut self, exchange: ExchangeId, out: Outgoing) {
        let rb = self.request(out.body, &out.headers);
        let meta = Meta {
            exchange,
            ids: out.ids,
            batch: out.batch,
        };
        let generation = self.generation;
        let single = (!meta.batch && meta.ids.len() == 1).then(|| meta.ids[0].clone());
        let stream = exchange_stream(rb, meta, self.max_message_bytes)
            .map(move |event| Item::Event { event, generation });
        match (&self.cancel_style, single) {
            (CancelStyle::CloseStream, Some(id)) => {
                let (handle, reg) = AbortHandle::new_pair();
                self.streams.insert(id, (exchange, handle));
                self.exchanges.push(Abortable::new(stream, reg).boxed());
            }
            _ => self.exchanges.push(stream.boxed()),
        }
    }

    /// Posts a message nobody waits for (a cancel notification); its answer is dropped.
    fn post_quietly(&mut self, body: Bytes) {
        let fut = self.request(body, &McpHeaders::default()).send();
        self.exchanges.push(
            futures_util::stream::once(fut)
                .filter_map(|_| std::future::ready(None::<Item>))
                .boxed(),
        );
    }

    /// Sends one POST outside the event machinery and reads its whole answer: for
    /// handshakes, discovery and probes, where status and headers are the evidence.
    pub async fn post_once(
        &self,
        body: Bytes,
        headers: &McpHeaders,
        timeout: Duration,
    ) -> Result<Reply, TransportError> {
        let rb = self.request(body, headers).timeout(timeout);
        read_reply(rb, self.max_message_bytes).await
    }

    fn start_restart(&mut self) {
        let Some(init) = self.legacy_init.clone() else {
            return;
        };
        self.restarting = true;
        let client = self.client.clone();
        let url = self.url.clone();
        let version = self.protocol_version.clone();
        let max = self.max_message_bytes;
        let fut = async move { reinitialize(client, url, version, &init, max).await };
        self.exchanges
            .push(fut.into_stream().map(Item::SessionReady).boxed());
    }

    fn on_session_ready(&mut self, result: Result<HeaderValue, TransportError>) {
        self.restarting = false;
        match result {
            Ok(session) => {
                self.set_session(Some(session));
                self.counters.session_restarts += 1;
                for (ex, out) in std::mem::take(&mut self.held) {
                    self.launch(ex, out);
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
        for id in ids {
            // The id may already belong to a newer exchange (reused once answered).
            if self
                .streams
                .get(id)
                .is_some_and(|(ex, _)| Some(*ex) == exchange)
            {
                self.streams.remove(id);
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
            self.launch(ex, out);
        }
        ex
    }

    fn cancel(&mut self, id: &Id) {
        match self.cancel_style {
            CancelStyle::CloseStream => {
                if let Some((_, handle)) = self.streams.remove(id) {
                    handle.abort();
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
        self.streams.clear();
        self.open = 0;
        if self.legacy_init.is_none() {
            return;
        }
        if let Some(session) = self.session.take() {
            let mut rb = self
                .client
                .delete(self.url.clone())
                .header(SESSION_HEADER, session)
                .timeout(Duration::from_secs(5));
            if let Some(v) = &self.protocol_version {
                rb = rb.header(VERSION_HEADER, v.clone());
            }
            // 200, 204 or 405 (the server does not let clients end sessions): all fine.
            let _ = rb.send().await;
        }
    }
}

/// What the exchange needs to report its end.
struct Meta {
    exchange: ExchangeId,
    ids: Vec<Id>,
    batch: bool,
}

enum Phase {
    Send(reqwest::RequestBuilder),
    Body {
        resp: reqwest::Response,
        status: u16,
        retry_after_s: Option<u64>,
        reader: BodyReader,
    },
    Done,
}

struct ExchangeState {
    meta: Meta,
    phase: Phase,
    queue: VecDeque<Event>,
    /// A batch's answer held a JSON array (so it was answered, not refused as a whole).
    answered_array: bool,
    /// The code of the single error a refused batch got.
    error_code: Option<i64>,
}

/// One POST and its answer as a stream of events, the terminal one last.
fn exchange_stream(
    rb: reqwest::RequestBuilder,
    meta: Meta,
    max: usize,
) -> impl futures_util::Stream<Item = Event> + Send + 'static {
    let st = ExchangeState {
        meta,
        phase: Phase::Send(rb),
        queue: VecDeque::new(),
        answered_array: false,
        error_code: None,
    };
    futures_util::stream::unfold(st, move |mut st| async move {
        loop {
            if let Some(ev) = st.queue.pop_front() {
                return Some((ev, st));
            }
            match std::mem::replace(&mut st.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Send(rb) => match rb.send().await {
                    Err(e) => st.queue.push_back(Event::Failed {
                        exchange: Some(st.meta.exchange),
                        ids: std::mem::take(&mut st.meta.ids),
                        error: TransportError::from_reqwest(&e),
                    }),
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let retry_after_s = resp
                            .headers()
                            .get(reqwest::header::RETRY_AFTER)
                            .and_then(parse_retry_after);
                        let reader =
                            BodyReader::new(resp.headers().get(reqwest::header::CONTENT_TYPE), max);
                        st.phase = Phase::Body {
                            resp,
                            status,
                            retry_after_s,
                            reader,
                        };
                    }
                },
                Phase::Body {
                    mut resp,
                    status,
                    retry_after_s,
                    mut reader,
                } => match resp.chunk().await {
                    Ok(Some(chunk)) => {
                        let at = Instant::now();
                        let more = reader.feed(&chunk, at, &mut |p| st.piece(p, status));
                        if more {
                            st.phase = Phase::Body {
                                resp,
                                status,
                                retry_after_s,
                                reader,
                            };
                        } else {
                            st.finish(status, retry_after_s, reader.kind());
                        }
                    }
                    Ok(None) => {
                        reader.finish(Instant::now(), status < 400, &mut |p| st.piece(p, status));
                        st.finish(status, retry_after_s, reader.kind());
                    }
                    Err(e) => {
                        reader.finish(Instant::now(), false, &mut |p| st.piece(p, status));
                        st.queue.push_back(Event::Failed {
                            exchange: Some(st.meta.exchange),
                            ids: std::mem::take(&mut st.meta.ids),
                            error: TransportError::from_reqwest(&e),
                        });
                    }
                },
            }
        }
    })
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

/// `Retry-After`: delay-seconds or an HTTP date.
fn parse_retry_after(v: &HeaderValue) -> Option<u64> {
    let s = v.to_str().ok()?.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Some(n);
    }
    let at = httpdate::parse_http_date(s).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .map_or(0, |d| d.as_secs()),
    )
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
    fn new(content_type: Option<&HeaderValue>, max: usize) -> Self {
        let ct = content_type
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim().to_ascii_lowercase());
        let kind = match ct.as_deref() {
            Some(s) if s.starts_with("text/event-stream") => BodyKind::Sse,
            Some(s) if s.starts_with("application/json") || s.contains("+json") => BodyKind::Json,
            _ => BodyKind::Other,
        };
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

/// Sends a request and reads the whole answer.
async fn read_reply(rb: reqwest::RequestBuilder, max: usize) -> Result<Reply, TransportError> {
    let mut resp = rb
        .send()
        .await
        .map_err(|e| TransportError::from_reqwest(&e))?;
    let status = resp.status().as_u16();
    let headers = resp.headers();
    let content_type = headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let session_id = headers.get(SESSION_HEADER).cloned();
    let retry_after_s = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(parse_retry_after);
    let mut reader = BodyReader::new(headers.get(reqwest::header::CONTENT_TYPE), max);
    let mut messages = Vec::new();
    let mut unreadable = Vec::new();
    let mut sink = |p: Piece| match p {
        Piece::Message(at, b) => messages.push((at, b)),
        Piece::Unreadable(_, why) => unreadable.push(why),
    };
    let mut broken = None;
    loop {
        match resp.chunk().await {
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
                broken = Some(TransportError::from_reqwest(&e));
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
    client: reqwest::Client,
    url: reqwest::Url,
    version: Option<HeaderValue>,
    init: &LegacyInit,
    max: usize,
) -> Result<HeaderValue, TransportError> {
    let timeout = Duration::from_secs(30);
    let mut rb = client
        .post(url.clone())
        .body(init.initialize.clone())
        .timeout(timeout);
    if let Some(v) = &version {
        rb = rb.header(VERSION_HEADER, v.clone());
    }
    let reply = read_reply(rb, max).await?;
    if reply.status >= 400 {
        return Err(TransportError::Session(format!(
            "initialize answered HTTP {}",
            reply.status
        )));
    }
    let session = reply
        .session_id
        .ok_or_else(|| TransportError::Session("initialize gave no session id".into()))?;
    let mut rb = client
        .post(url)
        .body(init.initialized.clone())
        .header(SESSION_HEADER, session.clone())
        .timeout(timeout);
    if let Some(v) = &version {
        rb = rb.header(VERSION_HEADER, v.clone());
    }
    let status = rb
        .send()
        .await
        .map_err(|e| TransportError::from_reqwest(&e))?
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
        let v = HeaderValue::from_str(ct).unwrap();
        let mut r = BodyReader::new(Some(&v), max);
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

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after(&HeaderValue::from_static("7")), Some(7));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let s = parse_retry_after(&HeaderValue::from_str(&later).unwrap()).unwrap();
        assert!((100..=120).contains(&s), "{s}");
        assert_eq!(parse_retry_after(&HeaderValue::from_static("soon")), None);
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
