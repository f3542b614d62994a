//! Where the target is and what every request to it carries: the URL's parts, how a
//! connection is opened (TCP, or rustls with ring and the platform's roots for `https://`,
//! HTTP/1.1 only), and the head each request starts with.

use super::connection::{Connection, Tls};
use crate::protocol::headers;
use crate::transport::budget::AnswerBudget;
use crate::transport::{McpHeaders, TransportError};
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use rustls::pki_types::ServerName;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub(super) const SESSION_HEADER: HeaderName = HeaderName::from_static(headers::SESSION_ID);
pub(super) const VERSION_HEADER: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);
pub(super) const METHOD_HEADER: HeaderName = HeaderName::from_static(headers::METHOD);
pub(super) const NAME_HEADER: HeaderName = HeaderName::from_static(headers::NAME);
/// Headers written per request, never from the custom headers into the prefix.
const SET_PER_REQUEST: [HeaderName; 3] = [CONTENT_LENGTH, METHOD_HEADER, NAME_HEADER];

/// How long opening a connection (TCP, and TLS for `https://`) may take unless told
/// otherwise: below the default request timeout, so that a target that does not take
/// connections shows as `transport_errors` naming the cause, not as slow answers.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How the HTTP client and its transports are set up.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// The most connections a transport has open to the target at once, busy or idle.
    /// Everything it sends goes over them (the load, the handshake, cancel notifications,
    /// a session's re-initialization and DELETE, probes); a request that finds them all busy
    /// waits for the first one free. Size it to the requests in flight, so a steady load
    /// never waits or reconnects.
    pub pool_size: usize,
    /// Headers sent on every request (custom headers, already expanded). Values are marked
    /// sensitive so they never show in debug output.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Largest JSON body or SSE event accepted; a larger one is dropped and counted.
    pub max_message_bytes: usize,
    /// What answers being read may hold at once, shared by every transport given these
    /// options (or a clone of them); at the budget the largest one fails as oversized.
    pub answer_budget: AnswerBudget,
    /// Bound on opening a connection: TCP, and TLS for `https://`. A connect that takes
    /// longer fails its request, naming the part that did not finish.
    pub connect_timeout: Duration,
    /// Longest an exchange may stay open (request, answer and stream); `None`: unbounded.
    pub exchange_timeout: Option<Duration>,
    /// Every HTTP 400 to a request that carried a session id says the session is gone (for
    /// servers known to answer so); otherwise only a 400 whose JSON-RPC error says so does.
    pub session_lost_on_400: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            pool_size: 64,
            headers: Vec::new(),
            max_message_bytes: 16 << 20,
            answer_budget: AnswerBudget::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            exchange_timeout: None,
            session_lost_on_400: false,
        }
    }
}

/// The target of every transport made from it: its URL, how to connect, the headers every
/// request carries. Cloning shares it.
#[derive(Clone)]
pub struct HttpClient {
    target: Arc<Target>,
}

struct Target {
    url: Uri,
    /// The host to connect to (an IPv6 literal without its brackets) and its port.
    host: String,
    port: u16,
    /// `Some` for `https://`.
    tls: Option<Tls>,
    connect_timeout: Duration,
    /// The request target in origin form (`/path?query`).
    path: String,
    /// The `Host` header: the URL's host, and its port when the URL names one.
    host_header: HeaderValue,
    /// `Accept`, `Content-Type` and the custom headers (values marked sensitive).
    base: HeaderMap,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Custom headers may hold secrets: only their number is shown.
        f.debug_struct("HttpClient")
            .field("url", &self.target.url)
            .field("headers", &self.target.base.len())
            .finish_non_exhaustive()
    }
}

/// rustls with ring, the platform's roots, HTTP/1.1 by ALPN.
fn platform_tls() -> Result<rustls::ClientConfig, TransportError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::Invalid(format!("TLS setup: {e}")))?
        .with_platform_verifier()
        .map_err(|e| TransportError::Invalid(format!("TLS roots: {e}")))?
        .with_no_client_auth())
}

impl HttpClient {
    /// The client for `url` (`http://` or `https://`): no proxy (a proxy would be measured
    /// too), Nagle off, certificates checked against the platform's roots.
    pub fn new(url: &Uri, opts: &HttpOptions) -> Result<Self, TransportError> {
        let tls = match url.scheme_str() {
            Some("https") => Some(platform_tls()?),
            _ => None,
        };
        Self::with_tls(url, opts, tls)
    }

    /// The client for `url`, with `tls` for an `https://` one (tests bring their own roots).
    pub(super) fn with_tls(
        url: &Uri,
        opts: &HttpOptions,
        tls: Option<rustls::ClientConfig>,
    ) -> Result<Self, TransportError> {
        let invalid = |why: &str| TransportError::Invalid(format!("url {url}: {why}"));
        let https = match url.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(invalid("use http or https")),
        };
        let bracketed = url
            .host()
            .filter(|h| !h.is_empty())
            .ok_or(invalid("no host"))?;
        let host = bracketed.trim_start_matches('[').trim_end_matches(']');
        let tls = match (https, tls) {
            (false, _) => None,
            (true, None) => return Err(invalid("no TLS setup for https")),
            (true, Some(mut config)) => {
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|e| invalid(&format!("TLS server name: {e}")))?;
                Some(Tls {
                    connector: Arc::new(config).into(),
                    name,
                })
            }
        };
        let host_header = HeaderValue::from_str(&match url.port_u16() {
            Some(port) => format!("{bracketed}:{port}"),
            None => bracketed.to_owned(),
        })
        .map_err(|_| invalid("host is not a valid header value"))?;
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
            target: Arc::new(Target {
                url: url.clone(),
                host: host.to_owned(),
                port: url.port_u16().unwrap_or(if https { 443 } else { 80 }),
                tls,
                connect_timeout: opts.connect_timeout,
                path: url.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
                host_header,
                base,
            }),
        })
    }

    pub fn url(&self) -> &Uri {
        &self.target.url
    }

    /// Opens a new connection to the target (TCP, then TLS for `https://`).
    pub(super) fn connect(
        &self,
    ) -> impl Future<Output = Result<Connection, TransportError>> + Send + use<> {
        let target = Arc::clone(&self.target);
        async move {
            let t = &*target;
            Connection::connect(&t.host, t.port, t.tls.as_ref(), t.connect_timeout).await
        }
    }
}

/// The request methods mcpload sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Method {
    Post,
    /// Ends a legacy session.
    Delete,
    /// Resumes an SSE stream (with `Last-Event-ID`).
    Get,
}

impl Method {
    fn verb(self) -> &'static [u8] {
        match self {
            Method::Post => b"POST",
            Method::Delete => b"DELETE",
            Method::Get => b"GET",
        }
    }
}

/// What every request of one transport starts with: the request line, `Host`, the base
/// headers, the protocol version and the session, encoded once (and again when the version or
/// the session changes), so a request costs no header map and no formatting.
#[derive(Debug)]
pub(super) struct RequestHead {
    /// `POST <path> HTTP/1.1` and the headers up to the per-request ones.
    prefix: Vec<u8>,
    /// Custom `Mcp-Method` / `Mcp-Name` headers, sent when a request carries none of its own.
    custom_method: Option<HeaderValue>,
    custom_name: Option<HeaderValue>,
    /// It carries `Mcp-Session-Id`.
    pub(super) session: bool,
}

impl RequestHead {
    pub(super) fn new(
        client: &HttpClient,
        version: Option<&HeaderValue>,
        session: Option<&HeaderValue>,
    ) -> Self {
        let t = &*client.target;
        let mut w = Vec::with_capacity(256);
        w.extend_from_slice(b"POST ");
        w.extend_from_slice(t.path.as_bytes());
        w.extend_from_slice(b" HTTP/1.1\r\n");
        // The headers mcpload sets win over custom headers of the same name.
        let custom = &t.base;
        let ours = [
            (&HOST, Some(&t.host_header)),
            (&VERSION_HEADER, version),
            (&SESSION_HEADER, session),
        ];
        let carries_session = session.or_else(|| custom.get(SESSION_HEADER)).is_some();
        for (name, value) in ours {
            if let Some(v) = value.or_else(|| custom.get(name)) {
                push_header(&mut w, name.as_str(), v.as_bytes());
            }
        }
        for (name, value) in custom {
            if !SET_PER_REQUEST.contains(name) && !ours.iter().any(|(n, _)| *n == name) {
                push_header(&mut w, name.as_str(), value.as_bytes());
            }
        }
        RequestHead {
            prefix: w,
            custom_method: custom.get(METHOD_HEADER).cloned(),
            custom_name: custom.get(NAME_HEADER).cloned(),
            session: carries_session,
        }
    }

    /// Writes a whole request: the prefix, the per-request headers, the body.
    pub(super) fn encode(
        &self,
        method: Method,
        headers: &McpHeaders,
        last_event_id: Option<&HeaderValue>,
        body: &[u8],
        w: &mut Vec<u8>,
    ) {
        // The prefix is a POST's: its first word is the method's.
        w.extend_from_slice(method.verb());
        w.extend_from_slice(&self.prefix[b"POST".len()..]);
        if let Some(v) = last_event_id {
            push_header(w, "last-event-id", v.as_bytes());
        }
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
        for (name, value) in headers.params.iter().flat_map(|p| p.iter()) {
            push_header(w, name.as_str(), value.as_bytes());
        }
        push_header(
            w,
            "content-length",
            itoa::Buffer::new().format(body.len()).as_bytes(),
        );
        w.extend_from_slice(b"\r\n");
        w.extend_from_slice(body);
    }
}

fn push_header(w: &mut Vec<u8>, name: &str, value: &[u8]) {
    w.extend_from_slice(name.as_bytes());
    w.extend_from_slice(b": ");
    w.extend_from_slice(value);
    w.extend_from_slice(b"\r\n");
}
