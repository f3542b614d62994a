//! The HTTP/1.1 connections one transport owns for an `http://` target: idle ones ready for
//! the next request, the most it may open, the requests waiting for one, and how a request's
//! bytes are encoded.

use super::HttpOptions;
use super::client::{METHOD_HEADER, NAME_HEADER};
use super::connection::H1Conn;
use crate::transport::{ExchangeId, McpHeaders, Outgoing, TransportError};
use http::{HeaderValue, Uri};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// The HTTP/1.1 connections a transport owns for an `http://` target, so a request skips
/// the shared pool (its lookups, locks, connection task and channels): a request takes an
/// idle connection or opens one, up to `cap`, else waits in `waiting`.
pub(super) struct Conns {
    pub(super) dial: Dial,
    /// The request target in origin form (`/path?query`).
    pub(super) path: String,
    /// Every request's head up to the per-request headers: the request line, `Host`, the
    /// base headers, the protocol version and the session. Re-encoded when those change.
    pub(super) prefix: Vec<u8>,
    /// Custom `Mcp-Method` / `Mcp-Name` headers, sent when a request carries none of its own.
    pub(super) custom_method: Option<HeaderValue>,
    pub(super) custom_name: Option<HeaderValue>,
    pub(super) cap: usize,
    /// Connections open or opening, idle or not.
    pub(super) live: usize,
    pub(super) idle: Vec<H1Conn>,
    pub(super) waiting: VecDeque<(ExchangeId, Outgoing, tokio::time::Instant)>,
}

impl Conns {
    pub(super) fn for_url(url: &Uri, opts: &HttpOptions) -> Option<Self> {
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
    pub(super) fn take(&mut self) -> Option<Option<H1Conn>> {
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
    pub(super) fn encode(&self, headers: &McpHeaders, body: &[u8], w: &mut Vec<u8>) {
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

    pub(super) fn reset(&mut self) {
        self.live = 0;
        self.idle.clear();
        self.waiting.clear();
    }
}

pub(super) fn push_header(w: &mut Vec<u8>, name: &str, value: &[u8]) {
    w.extend_from_slice(name.as_bytes());
    w.extend_from_slice(b": ");
    w.extend_from_slice(value);
    w.extend_from_slice(b"\r\n");
}

/// Where and how to open a connection.
#[derive(Clone)]
pub(super) struct Dial {
    pub(super) host: Arc<str>,
    pub(super) port: u16,
    pub(super) timeout: Duration,
}

impl Dial {
    /// Opens a connection and starts `request` on it.
    pub(super) async fn open(self, request: Vec<u8>) -> Result<H1Conn, TransportError> {
        let mut conn = H1Conn::connect(&self.host, self.port, self.timeout).await?;
        conn.start(|w| *w = request);
        Ok(conn)
    }
}
