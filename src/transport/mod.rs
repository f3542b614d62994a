//! Moving JSON-RPC bytes to and from a server: one [`Transport`] trait, one module per
//! transport (Streamable HTTP and the legacy HTTP+SSE in `http`, a child process in `stdio`), the incremental SSE
//! parser in `sse`, the answer budget every HTTP answer being read is charged to in `budget`.
//! A transport reports transport facts as [`Event`]s; the correlator's
//! `Ledger` turns them into the counts of docs/metrics.md.
//!
//! # How a worker drives a transport
//!
//! One worker task owns one transport, one `Correlator` and one `Ledger`; nothing is
//! shared, nothing is locked, no channel carries a request. The worker
//!
//! 1. registers a request's id in its correlator, then calls [`Transport::send`] with an
//!    [`Outgoing`] (the encoded body, usually built by `client::Operation::request`). `send`
//!    never blocks and never fails: a refusal or a dead transport comes back as an event;
//! 2. awaits [`Transport::next_event`] (cancel-safe: use it in `tokio::select!` beside the
//!    worker's timers) and hands every event to `Ledger::apply`, which ingests messages
//!    and ends unanswered requests (`missing`, `http_429`, `http_503`, `http_other`,
//!    `transport_errors`) exactly as docs/metrics.md defines;
//! 3. on a timeout (`Correlator::expire`), calls [`Transport::cancel`] for each expired id:
//!    `notifications/cancelled`, or closing the request's SSE stream under 2026-07-28 HTTP;
//!    a response that still comes is counted `late` by the correlator;
//! 4. at a step's end merges the correlator's stats with [`Transport::take_counters`]; at the
//!    run's end calls [`Transport::close`].
//!
//! Every [`Event::Message`] carries the instant its bytes were parsed off the wire, so the
//! latency does not include the time the worker took to look at it.

pub mod auth;
pub mod budget;
mod fleet;
mod http;
pub mod sse;
mod stdio;

pub use auth::{Challenge, Credentials};
pub use budget::{AnswerBudget, DEFAULT_MAX_ANSWER_MEMORY};
pub use fleet::{ChildPids, FleetOptions, StdioFleet};
/// The HTTP/1.1 fuzz target's entry point (built with `--cfg fuzzing` only).
#[cfg(fuzzing)]
pub use http::read_scripted_answer;
pub use http::{
    DEFAULT_CONNECT_TIMEOUT, HttpClient, HttpOptions, HttpTransport, LegacyInit,
    LegacySseTransport, OpenConnections, Reply, TlsOptions,
};
pub use stdio::{EXITS_KEPT, ProcessExit, ProcessReport, StderrTail, StdioOptions, StdioTransport};

use crate::jsonrpc::Id;
use crate::metrics::{Counters, LatencyHistogram};
use ::http::{HeaderName, HeaderValue};
use bytes::Bytes;
use std::future::Future;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Identifies one exchange: one HTTP POST and its answer. Unique per transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId(pub u64);

/// The per-request HTTP headers of MCP 2026-07-28 (ignored by stdio and by legacy HTTP).
/// Built once per operation; cloning is a reference-count increment.
#[derive(Clone, Debug, Default)]
pub struct McpHeaders {
    /// `Mcp-Method`: the JSON-RPC method.
    pub method: Option<HeaderValue>,
    /// `Mcp-Name`: the tool name, resource uri or prompt name, encoded for a header.
    pub name: Option<HeaderValue>,
    /// `Mcp-Param-{Name}`: the tool arguments its schema marks with `x-mcp-header`.
    pub params: Option<std::sync::Arc<[(HeaderName, HeaderValue)]>>,
}

/// One message or batch to write.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// The encoded JSON text: one message or a JSON array.
    pub body: Bytes,
    /// The ids of the requests it carries (none for notifications).
    pub ids: Vec<Id>,
    /// The body is a JSON array.
    pub batch: bool,
    /// Headers the era wants on the POST.
    pub headers: McpHeaders,
    /// The virtual user sending it, when each user carries a token of its own
    /// (`token_per_user`); `None`: the run's shared token.
    pub user: Option<u32>,
}

impl Outgoing {
    /// A single request or notification (`id: None`).
    pub fn single(body: Bytes, id: Option<Id>, headers: McpHeaders) -> Self {
        Outgoing {
            body,
            ids: id.into_iter().collect(),
            batch: false,
            headers,
            user: None,
        }
    }

    /// A batch: a JSON array whose members with an id are `ids`.
    pub fn batch(body: Bytes, ids: Vec<Id>) -> Self {
        Outgoing {
            body,
            ids,
            batch: true,
            headers: McpHeaders::default(),
            user: None,
        }
    }

    /// Sent by virtual user `user` (`None`: the run's shared token).
    pub fn by(mut self, user: Option<u32>) -> Self {
        self.user = user;
        self
    }
}

/// What kind of body an HTTP answer had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyKind {
    /// No body (202, 204, or an empty body).
    Empty,
    /// `application/json`.
    Json,
    /// `text/event-stream`.
    Sse,
    /// Anything else (a plain-text error page, HTML).
    Other,
}

/// Why bytes off the wire could not be handed over as a JSON text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// A body, SSE event or stdio line longer than the configured bound.
    TooLarge,
    /// An SSE stream or stdio output that ended in the middle of an event or line.
    Truncated,
    /// A successful HTTP answer with a content type that carries no JSON-RPC.
    UnexpectedContentType,
}

impl Unreadable {
    pub fn as_str(self) -> &'static str {
        match self {
            Unreadable::TooLarge => "message larger than the limit",
            Unreadable::Truncated => "message cut off by the end of the stream",
            Unreadable::UnexpectedContentType => "unexpected content type",
        }
    }
}

/// A failure of the transport itself: counted as `transport_errors`.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum TransportError {
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("request failed: {0}")]
    Request(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("child process is not running: {0}")]
    NotRunning(String),
    #[error("the session could not be re-initialized: {0}")]
    Session(String),
    #[error("authorization failed: {0}")]
    Auth(String),
    #[error("invalid request for this transport: {0}")]
    Invalid(String),
}

/// What a transport reports. Terminal events (`Closed`, `Refused`, `Retried`, `Failed`) come
/// exactly once per exchange, after all of that exchange's messages.
#[derive(Debug)]
pub enum Event {
    /// One JSON text: a JSON body, one SSE event's data, one stdio line. `exchange` is `None`
    /// on stdio (no per-request exchange); `batch` says the exchange carried a batch.
    Message {
        exchange: Option<ExchangeId>,
        batch: bool,
        at: Instant,
        bytes: Bytes,
    },
    /// Bytes that could not become a JSON text (counted as `parse_errors`).
    Unreadable {
        exchange: Option<ExchangeId>,
        at: Instant,
        why: Unreadable,
    },
    /// The exchange ended (2xx answer read to its end): its still-pending ids are `missing`.
    Closed {
        exchange: ExchangeId,
        ids: Vec<Id>,
        batch: bool,
        status: u16,
        body: BodyKind,
    },
    /// HTTP status >= 400. Any JSON-RPC response in the body came first as a `Message`; ids
    /// still pending end as `http_429`, `http_503` or `http_other`. `batch_rejected`: a batch
    /// answered with no JSON array (a single error, plain text): the server refused the batch
    /// as a whole; its one error object (code in `error_code`) is not counted as a message.
    Refused {
        exchange: ExchangeId,
        ids: Vec<Id>,
        batch: bool,
        status: u16,
        retry_after_s: Option<u64>,
        batch_rejected: bool,
        error_code: Option<i64>,
    },
    /// HTTP: the exchange was refused and its request is sent again, with the same id (the
    /// server refused it before reading it, so no answer can come for this attempt): because
    /// the session it was sent in is gone (404, or a 400 that says so), in the new session;
    /// or because its token was refused (401), with a newer one. This attempt ends
    /// `http_other` (`http_401` too for a token); the retry is registered anew
    /// (docs/metrics.md, "Retries").
    Retried {
        exchange: ExchangeId,
        ids: Vec<Id>,
        cause: RetryCause,
    },
    /// The exchange failed in the transport (refused, reset, TLS, child gone): its pending
    /// ids are `transport_errors`.
    Failed {
        exchange: Option<ExchangeId>,
        ids: Vec<Id>,
        error: TransportError,
    },
    /// HTTP: requests held for a token (none usable until a fetch ended) were written only
    /// now: their service latency runs from `at` (docs/metrics.md, "Authorization").
    Released { ids: Vec<Id>, at: Instant },
    /// stdio, a process per session: the child these requests were written to exited before
    /// answering them; they are `missing` (the user's next request starts a new child).
    Abandoned { ids: Vec<Id> },
    /// The transport is gone for good (a stdio child exited or closed its output): every
    /// pending request is `missing`; later sends fail as `transport_errors`.
    Down { error: TransportError },
}

impl Event {
    /// Whether it ends its exchange.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Event::Closed { .. }
                | Event::Refused { .. }
                | Event::Retried { .. }
                | Event::Failed { .. }
        )
    }
}

/// Why a refused request is sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryCause {
    /// Its session was gone: sent in the new one.
    Session,
    /// Its token was refused (401): sent with a newer one.
    Token,
    /// Its token lacked the scope (403 `insufficient_scope`): sent with one authorized for
    /// the wider scope (a step-up; counted with the token retries).
    Scope,
}

/// What cancelling a timed-out request found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// Some of it had been written: the server may have seen it (`timeouts`).
    Sent,
    /// It was waiting for a connection: withdrawn, no byte of it written (`expired_unsent`).
    Unsent,
}

/// Counts the transport keeps itself; added into a step's [`Counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransportCounters {
    /// HTTP answers saying that the session the request carried is gone (docs/metrics.md,
    /// "Sessions"): 404, or 400 with a JSON-RPC error that says so (any 400 with
    /// `session_lost_on_400`), whatever the request was (load, handshake, a re-initialization
    /// step, a cancel notification, the DELETE).
    pub session_lost: u64,
    /// Legacy HTTP sessions opened anew after a loss (`initialize` and
    /// `notifications/initialized` both accepted).
    pub reinitializations: u64,
    /// Re-initializations that gave no usable session (the requests held for it fail).
    pub reinit_failed: u64,
    /// Time spent re-initializing (the load held meanwhile), summed, and the longest.
    pub reinit_time: Duration,
    pub reinit_max: Duration,
    /// Requests sent again in the new session after their session was lost (each a new
    /// request; the attempt it replaces ended `http_other`).
    pub retries_session: u64,
    /// Time spent with bytes waiting because the child's stdin was full.
    pub stdio_write_block: Duration,
    /// stdout lines that were not JSON.
    pub stdout_pollution: u64,
    /// Of those, the lines the connect read and skipped itself, before any correlator saw
    /// them: handed over as `parse_errors` too, so the pollution stays their breakdown.
    pub connect_parse_errors: u64,
    /// Children that exited while their session was in use.
    pub process_exits: u64,
    /// Children not started for the fleet's memory budget.
    pub fleet_budget_refusals: u64,
    /// The most children alive at once since the counts were last taken.
    pub processes_max: u64,
    /// HTTP requests sent on another connection because the idle one picked for them was
    /// found closed before any byte of them was written.
    pub reconnects_before_send: u64,
    /// SSE answers resumed with a GET and `Last-Event-ID` after their stream ended early.
    pub sse_resumptions: u64,
    /// Requests whose resumed answer ended without the response (they end `missing`).
    pub sse_resumptions_failed: u64,
    /// Requests answered 401 and sent again with a newer token.
    pub retries_token: u64,
    /// Requests that ended for want of a token the target takes: a 401 not sent again (its
    /// token was fresh, static, or it was a retry already), or a fetch that failed.
    pub auth_failures: u64,
}

impl TransportCounters {
    /// Adds these counts into `c` and starts afresh.
    pub fn drain_into(&mut self, c: &mut Counters) {
        c.session_lost += self.session_lost;
        c.reinitializations += self.reinitializations;
        c.reinit_failed += self.reinit_failed;
        c.reinit_us += self.reinit_time.as_micros() as u64;
        c.reinit_max_us = c.reinit_max_us.max(self.reinit_max.as_micros() as u64);
        c.retries_session += self.retries_session;
        c.stdio_write_block_ms += self.stdio_write_block.as_millis() as u64;
        c.stdout_pollution += self.stdout_pollution;
        c.parse_errors += self.connect_parse_errors;
        c.process_exits += self.process_exits;
        c.fleet_budget_refusals += self.fleet_budget_refusals;
        c.processes_max = c.processes_max.max(self.processes_max);
        c.reconnects_before_send += self.reconnects_before_send;
        c.sse_resumptions += self.sse_resumptions;
        c.sse_resumptions_failed += self.sse_resumptions_failed;
        c.retries_token += self.retries_token;
        c.auth_failures += self.auth_failures;
        *self = TransportCounters::default();
    }

    /// Hands these counts over into `into`, and adds them to `handed` (what a transport has
    /// handed over since it was made).
    pub(crate) fn hand_over(&mut self, into: &mut Counters, handed: &mut Counters) {
        let mut copy = *self;
        copy.drain_into(handed);
        self.drain_into(into);
    }
}

/// The client side of one connection to a server. See the module docs for the worker loop.
pub trait Transport: Send {
    /// Queues one message or batch. Never blocks and never fails: the outcome comes as
    /// events, the first time [`Transport::next_event`] is polled.
    fn send(&mut self, out: Outgoing) -> ExchangeId;

    /// Cancels a request that timed out: one that never left (waiting for a connection) is
    /// withdrawn and never sent; one that did is cancelled as its era says (a notification,
    /// or its stream closed). Says which.
    fn cancel(&mut self, id: &Id) -> Cancelled;

    /// Polls for the next event. Pending when nothing is in flight (no exchange open, and on
    /// stdio no output).
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event>;

    /// The next event. Cancel-safe: dropping the future loses nothing.
    fn next_event(&mut self) -> impl Future<Output = Event> + Send + '_
    where
        Self: Sized,
    {
        std::future::poll_fn(move |cx| self.poll_event(cx))
    }

    /// HTTP: exchanges sent and not yet ended. stdio has no exchanges (requests in flight are
    /// the correlator's business): 1 while bytes wait to be written, else 0.
    fn open_exchanges(&self) -> usize;

    /// Adds the transport's own counters into `into` and resets them (with credentials, the
    /// run's token requests and refreshes since they were last taken, by any transport).
    fn take_counters(&mut self, into: &mut Counters);

    /// Adds the time of each token fetch since they were last taken (by any transport of the
    /// run) into `into`.
    fn take_token_fetches(&mut self, _into: &mut LatencyHistogram) {}

    /// stdio: records the start-up of each child whose handshake was answered since they
    /// were last taken: its spawn time and its connect time (from the spawn's start).
    fn take_startups(&mut self, _spawn: &mut LatencyHistogram, _connect: &mut LatencyHistogram) {}

    /// Adds into `into` every count of its own the transport made since it was made: those
    /// [`Transport::take_counters`] handed over (a warm-up's too) and those it holds now
    /// (after [`Transport::close`]: its DELETE's).
    fn add_totals(&self, into: &mut Counters);

    /// Ends the connection: DELETEs a legacy HTTP session, closes a child's stdin and waits
    /// briefly for it to exit (then kills it).
    fn close(&mut self) -> impl Future<Output = ()> + Send;
}

/// Any transport, so callers need no generics or boxing.
#[derive(Debug)]
pub enum AnyTransport {
    Http(Box<HttpTransport>),
    Stdio(Box<StdioTransport>),
    /// stdio, a process per session.
    Fleet(Box<StdioFleet>),
    LegacySse(Box<LegacySseTransport>),
}

impl AnyTransport {
    /// `http`, `sse` or `stdio`, as probe reports name it.
    pub fn short_name(&self) -> &'static str {
        match self {
            AnyTransport::Http(_) => "http",
            AnyTransport::Stdio(_) | AnyTransport::Fleet(_) => "stdio",
            AnyTransport::LegacySse(_) => "sse",
        }
    }

    /// stdio: what its children did (summary.json `processes`).
    pub fn process_report(&self) -> Option<ProcessReport> {
        match self {
            AnyTransport::Stdio(t) => Some(t.process_report()),
            AnyTransport::Fleet(t) => Some(t.process_report()),
            AnyTransport::Http(_) | AnyTransport::LegacySse(_) => None,
        }
    }
}

impl Transport for AnyTransport {
    fn send(&mut self, out: Outgoing) -> ExchangeId {
        match self {
            AnyTransport::Http(t) => t.send(out),
            AnyTransport::Stdio(t) => t.send(out),
            AnyTransport::Fleet(t) => t.send(out),
            AnyTransport::LegacySse(t) => t.send(out),
        }
    }

    fn cancel(&mut self, id: &Id) -> Cancelled {
        match self {
            AnyTransport::Http(t) => t.cancel(id),
            AnyTransport::Stdio(t) => t.cancel(id),
            AnyTransport::Fleet(t) => t.cancel(id),
            AnyTransport::LegacySse(t) => t.cancel(id),
        }
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        match self {
            AnyTransport::Http(t) => t.poll_event(cx),
            AnyTransport::Stdio(t) => t.poll_event(cx),
            AnyTransport::Fleet(t) => t.poll_event(cx),
            AnyTransport::LegacySse(t) => t.poll_event(cx),
        }
    }

    fn open_exchanges(&self) -> usize {
        match self {
            AnyTransport::Http(t) => t.open_exchanges(),
            AnyTransport::Stdio(t) => t.open_exchanges(),
            AnyTransport::Fleet(t) => t.open_exchanges(),
            AnyTransport::LegacySse(t) => t.open_exchanges(),
        }
    }

    fn take_counters(&mut self, into: &mut Counters) {
        match self {
            AnyTransport::Http(t) => t.take_counters(into),
            AnyTransport::Stdio(t) => t.take_counters(into),
            AnyTransport::Fleet(t) => t.take_counters(into),
            AnyTransport::LegacySse(t) => t.take_counters(into),
        }
    }

    fn add_totals(&self, into: &mut Counters) {
        match self {
            AnyTransport::Http(t) => t.add_totals(into),
            AnyTransport::Stdio(t) => t.add_totals(into),
            AnyTransport::Fleet(t) => t.add_totals(into),
            AnyTransport::LegacySse(t) => t.add_totals(into),
        }
    }

    fn take_token_fetches(&mut self, into: &mut LatencyHistogram) {
        match self {
            AnyTransport::Http(t) => t.take_token_fetches(into),
            AnyTransport::LegacySse(t) => t.take_token_fetches(into),
            AnyTransport::Stdio(_) | AnyTransport::Fleet(_) => {}
        }
    }

    fn take_startups(&mut self, spawn: &mut LatencyHistogram, connect: &mut LatencyHistogram) {
        match self {
            AnyTransport::Stdio(t) => t.take_startups(spawn, connect),
            AnyTransport::Fleet(t) => t.take_startups(spawn, connect),
            AnyTransport::Http(_) | AnyTransport::LegacySse(_) => {}
        }
    }

    async fn close(&mut self) {
        match self {
            AnyTransport::Http(t) => t.close().await,
            AnyTransport::Stdio(t) => t.close().await,
            AnyTransport::Fleet(t) => t.close().await,
            AnyTransport::LegacySse(t) => t.close().await,
        }
    }
}

/// How a transport cancels a request.
#[derive(Clone, Debug, Default)]
pub enum CancelStyle {
    /// Send `notifications/cancelled {requestId}` (legacy eras; 2026-07-28 over stdio).
    #[default]
    Notify,
    /// Close the request's response stream (2026-07-28 over HTTP).
    CloseStream,
}

/// Encodes `notifications/cancelled` for `id`.
pub(crate) fn cancel_notification(id: &Id) -> Bytes {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"#,
    );
    // Writing an id into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(br#","reason":"timed out"}}"#);
    Bytes::from(out)
}

/// Test servers' side of HTTP/1.1: reading one request off a stream, and TLS with a
/// self-signed certificate.
#[cfg(test)]
mod wire_for_tests {
    use std::sync::Arc;
    use tokio::io::{AsyncRead, AsyncReadExt};

    /// Reads the next whole request (its head, then a body of `Content-Length` bytes) and
    /// returns its head (lower-cased) and its body; `None` when the client hangs up first.
    /// `buf` keeps what is read past it.
    pub(super) async fn read_request<S: AsyncRead + Unpin>(
        sock: &mut S,
        buf: &mut Vec<u8>,
    ) -> Option<(String, Vec<u8>)> {
        loop {
            if let Some(end) = memchr::memmem::find(buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |n| n.trim().parse().unwrap());
                if buf.len() >= end + 4 + len {
                    let body = buf.drain(..end + 4 + len).skip(end + 4).collect();
                    return Some((head, body));
                }
            }
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// A fresh self-signed certificate for 127.0.0.1: a server setup that presents it, and a
    /// client setup that trusts it alone.
    pub(super) fn self_signed_tls() -> (tokio_rustls::TlsAcceptor, rustls::ClientConfig) {
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let issued = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let cert = issued.cert.der().clone();
        let key =
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(issued.signing_key.serialize_der()));
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server).into(), client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_notification_is_valid_json_rpc() {
        let b = cancel_notification(&Id::Str("a\"b".into()));
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["method"], "notifications/cancelled");
        assert_eq!(v["params"]["requestId"], "a\"b");
        assert!(v.get("id").is_none());
    }
}
