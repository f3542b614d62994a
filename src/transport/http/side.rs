//! Requests beside the load, whose answer is read whole into a [`Reply`]: the handshake's,
//! discovery's and probes' POSTs (awaited), cancel notifications (whose answer nobody
//! reads), a session restart's steps and its DELETE. They are exchanges like the load's, on
//! the same connections.

use super::HttpTransport;
use super::client::{Method, RequestHead};
use super::exchange::Request;
use super::session::RestartStep;
use crate::transport::{BodyKind, ExchangeId, McpHeaders, Outgoing, TransportError, Unreadable};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::{AbortHandle, AbortRegistration};
use http::HeaderValue;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Longest a cancel notification's answer is waited for (nobody reads it; its connection
/// is held meanwhile).
const QUIET_LIMIT: Duration = Duration::from_secs(30);

/// One whole HTTP answer, read to its end (handshakes and probes).
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: BodyKind,
    pub content_type: Option<String>,
    pub session_id: Option<HeaderValue>,
    /// `Location` of a redirect (3xx), kept for answers read whole.
    pub location: Option<String>,
    pub retry_after_s: Option<u64>,
    /// `WWW-Authenticate` of a 401 or 403.
    pub challenge: Option<String>,
    /// Every JSON text of the body, with the instant it was parsed.
    pub messages: Vec<(Instant, Bytes)>,
    pub unreadable: Vec<Unreadable>,
    /// The body broke off (reset) after the head.
    pub broken: Option<TransportError>,
}

/// What a side exchange's whole answer is for (a cancel notification's has no entry: it is
/// dropped).
pub(super) enum Side {
    /// Someone awaits it ([`HttpTransport::post`], a session's DELETE).
    Awaited {
        state: Awaiting,
        reply: Option<Result<Reply, TransportError>>,
    },
    /// A step of a session restart.
    Restart(RestartStep),
}

/// Where an awaited exchange is, so giving it up undoes the right thing.
pub(super) enum Awaiting {
    /// Waiting for a connection.
    Queued,
    /// On a connection, until its answer is read: aborted, it takes its connection along.
    Running(AbortHandle),
    /// Its answer is read and its connection back.
    Read,
}

impl HttpTransport {
    /// Sends a request whose answer is read whole (a side request), bounded by `limit`.
    pub(super) fn send_whole(
        &mut self,
        exchange: ExchangeId,
        method: Method,
        out: Outgoing,
        head: Option<RequestHead>,
        limit: Duration,
    ) {
        self.launch(Request {
            exchange,
            method,
            out,
            whole: true,
            head: head.map(Box::new),
            since: tokio::time::Instant::now(),
            limit: Some(limit),
            last_event_id: None,
            resumptions: 0,
            retriable: false,
            auth_retriable: false,
        });
    }

    /// Sends a request whose whole answer [`HttpTransport::reply`] awaits.
    pub(super) fn send_awaited(
        &mut self,
        method: Method,
        out: Outgoing,
        limit: Duration,
    ) -> ExchangeId {
        let ex = self.next_exchange();
        self.side.push((
            ex,
            Side::Awaited {
                state: Awaiting::Queued,
                reply: None,
            },
        ));
        self.send_whole(ex, method, out, None, limit);
        ex
    }

    /// Sends one POST outside the event machinery, on the transport's connections, and
    /// returns its exchange for [`HttpTransport::reply`] or [`HttpTransport::abandon`]: for
    /// handshakes, discovery and probes, where status and headers are the evidence. `timeout`
    /// bounds all of it, from now to the answer's end.
    pub fn post(&mut self, body: Bytes, headers: &McpHeaders, timeout: Duration) -> ExchangeId {
        let out = Outgoing::single(body, None, headers.clone());
        self.send_awaited(Method::Post, out, timeout)
    }

    /// The whole answer to a [`HttpTransport::post`]. Dropping this future loses nothing;
    /// the exchange goes on.
    pub async fn reply(&mut self, exchange: ExchangeId) -> Result<Reply, TransportError> {
        std::future::poll_fn(|cx| self.poll_reply(cx, exchange)).await
    }

    /// Gives up a [`HttpTransport::post`]: its stream is closed, its answer dropped.
    pub fn abandon(&mut self, exchange: ExchangeId) {
        let Some(at) = self.side.iter().position(|(ex, _)| *ex == exchange) else {
            return;
        };
        if let (_, Side::Awaited { state, .. }) = self.side.swap_remove(at) {
            match state {
                Awaiting::Queued => {
                    self.pool.withdraw(|r| r.exchange == exchange);
                }
                Awaiting::Running(handle) => {
                    handle.abort();
                    self.on_conn(None);
                }
                Awaiting::Read => {}
            }
        }
    }

    /// A GET of the target's URL, answered whole (a metadata document), bounded by
    /// `timeout`. Dropping the future before the answer's end closes the stream.
    pub fn get_once(
        &mut self,
        timeout: Duration,
    ) -> impl Future<Output = Result<Reply, TransportError>> + Send + '_ {
        let out = Outgoing::single(Bytes::new(), None, McpHeaders::default());
        let exchange = self.send_awaited(Method::Get, out, timeout);
        Awaited {
            transport: self,
            exchange,
            done: false,
        }
    }

    /// [`HttpTransport::post`] and its [`HttpTransport::reply`]. Dropping the future before
    /// the answer's end closes the stream ([`HttpTransport::abandon`]).
    pub fn post_once(
        &mut self,
        body: Bytes,
        headers: &McpHeaders,
        timeout: Duration,
    ) -> impl Future<Output = Result<Reply, TransportError>> + Send + '_ {
        let exchange = self.post(body, headers, timeout);
        Awaited {
            transport: self,
            exchange,
            done: false,
        }
    }

    /// Posts a message nobody waits for (a cancel notification); its answer is dropped.
    pub(super) fn post_quietly(&mut self, body: Bytes) {
        let ex = self.next_exchange();
        let out = Outgoing::single(body, None, McpHeaders::default());
        self.send_whole(ex, Method::Post, out, None, QUIET_LIMIT);
    }

    pub(super) fn poll_reply(
        &mut self,
        cx: &mut Context<'_>,
        exchange: ExchangeId,
    ) -> Poll<Result<Reply, TransportError>> {
        loop {
            let Some(at) = self.side.iter().position(|(ex, _)| *ex == exchange) else {
                return Poll::Ready(Err(TransportError::Invalid(
                    "no answer is awaited for this exchange".into(),
                )));
            };
            if let Side::Awaited { reply, .. } = &mut self.side[at].1
                && let Some(reply) = reply.take()
            {
                self.side.swap_remove(at);
                return Poll::Ready(reply);
            }
            match self.exchanges.poll_next_unpin(cx) {
                Poll::Ready(Some(item)) => {
                    if let Some(event) = self.on_item(item) {
                        self.ready.push_back(event);
                    }
                }
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// An awaited exchange is on a connection: from now on, giving it up aborts it.
    pub(super) fn running(&mut self, exchange: ExchangeId) -> Option<AbortRegistration> {
        let state = self.side.iter_mut().find_map(|(ex, side)| match side {
            Side::Awaited { state, .. } if *ex == exchange => Some(state),
            _ => None,
        })?;
        let (handle, reg) = AbortHandle::new_pair();
        *state = Awaiting::Running(handle);
        Some(reg)
    }

    /// A side exchange's answer has been read and its connection is back: giving it up no
    /// longer takes a connection along.
    pub(super) fn answer_read(&mut self, exchange: ExchangeId) {
        if let Some((_, Side::Awaited { state, .. })) =
            self.side.iter_mut().find(|(ex, _)| *ex == exchange)
        {
            *state = Awaiting::Read;
        }
    }

    /// A side exchange's whole answer: kept for whoever awaits it, or the restart's next step.
    pub(super) fn on_reply(&mut self, exchange: ExchangeId, reply: Result<Reply, TransportError>) {
        let Some(at) = self.side.iter().position(|(ex, _)| *ex == exchange) else {
            return;
        };
        match &mut self.side[at].1 {
            Side::Awaited { reply: slot, .. } => *slot = Some(reply),
            Side::Restart(_) => {
                if let (_, Side::Restart(step)) = self.side.swap_remove(at) {
                    self.on_restart_step(step, reply);
                }
            }
        }
    }
}

/// The future of [`HttpTransport::post_once`]: the reply, or the exchange given up when
/// dropped before it.
struct Awaited<'a> {
    transport: &'a mut HttpTransport,
    exchange: ExchangeId,
    done: bool,
}

impl Future for Awaited<'_> {
    type Output = Result<Reply, TransportError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let reply = std::task::ready!(this.transport.poll_reply(cx, this.exchange));
        this.done = true;
        Poll::Ready(reply)
    }
}

impl Drop for Awaited<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.transport.abandon(self.exchange);
        }
    }
}
