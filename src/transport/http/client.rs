//! How requests reach the target: the options, hyper's pooled client (rustls with the
//! platform's roots; it carries `https://` load, handshakes and side requests) and the headers
//! every request carries.

use super::Reply;
use super::body::{BodyReader, Piece};
use super::connection::{content_kind, retry_after_seconds};
use crate::protocol::headers;
use crate::transport::TransportError;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) const SESSION_HEADER: HeaderName = HeaderName::from_static(headers::SESSION_ID);
pub(super) const VERSION_HEADER: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);
pub(super) const METHOD_HEADER: HeaderName = HeaderName::from_static(headers::METHOD);
pub(super) const NAME_HEADER: HeaderName = HeaderName::from_static(headers::NAME);
/// Headers an own connection writes per request, never from the custom headers' prefix.
pub(super) const SET_PER_REQUEST: [HeaderName; 3] = [CONTENT_LENGTH, METHOD_HEADER, NAME_HEADER];

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
    pub(super) pool: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `Accept`, `Content-Type` and the custom headers (values marked sensitive).
    pub(super) base: Arc<HeaderMap>,
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
    pub(super) fn request(
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

    pub(super) fn send(&self, req: Request<Full<Bytes>>) -> ResponseFuture {
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
pub(super) fn transport_error(
    e: &(dyn std::error::Error + 'static),
    connect: bool,
) -> TransportError {
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

pub(super) fn client_error(e: &hyper_util::client::legacy::Error) -> TransportError {
    transport_error(e, e.is_connect())
}

pub(super) fn body_error(e: &hyper::Error) -> TransportError {
    transport_error(e, false)
}

/// The next data chunk of a body (trailers skipped); `None` at its end.
pub(super) async fn next_chunk(body: &mut Incoming) -> Result<Option<Bytes>, TransportError> {
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
pub(super) async fn read_reply(sent: ResponseFuture, max: usize) -> Result<Reply, TransportError> {
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
