//! Streamable HTTP: one POST per message or batch, answered by one JSON body or an SSE stream
//! read incrementally; every exchange in flight is a stream polled by the owning worker task
//! (no task per request, no channel). Legacy sessions are echoed and re-initialized on 404;
//! 2026-07-28 requests carry `Mcp-Method` / `Mcp-Name`, and a cancel closes their stream.

mod body;
mod client;
mod connection;
mod exchange;
mod pool;
mod session;

pub use client::{HttpClient, HttpOptions, build_client};
pub use session::LegacyInit;

use super::{
    BodyKind, CancelStyle, Event, ExchangeId, McpHeaders, Outgoing, Transport, TransportCounters,
    TransportError, Unreadable, cancel_notification,
};
use crate::jsonrpc::Id;
use crate::metrics::Counters;
use bytes::Bytes;
use client::{
    METHOD_HEADER, NAME_HEADER, SESSION_HEADER, SET_PER_REQUEST, VERSION_HEADER, read_reply,
};
use connection::H1Conn;
use exchange::{Exchange, ExchangeState, Flow, Item, Meta, Owed, Phase};
use futures_util::StreamExt;
use futures_util::stream::{AbortHandle, Abortable, SelectAll};
use http::header::HOST;
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::Full;
use pool::{Conns, push_header};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pub(super) fn too_slow() -> TransportError {
    TransportError::Timeout("the exchange outlasted its time limit".into())
}

/// Awaits `f`, bounded by `deadline` when there is one.
pub(super) async fn within<F: Future>(
    deadline: Option<tokio::time::Instant>,
    f: F,
) -> Result<F::Output, TransportError> {
    match deadline {
        None => Ok(f.await),
        Some(d) => tokio::time::timeout_at(d, f).await.map_err(|_| too_slow()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        use http::header::{AUTHORIZATION, CONTENT_LENGTH};
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
}
