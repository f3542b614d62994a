//! The legacy HTTP+SSE transport of 2024-11-05: one GET stream per session, whose first
//! event, `endpoint`, names the URL every message is POSTed to; each POST is answered 202
//! and every answer comes on the stream, answers to different requests interleaved. The
//! POSTs are an [`HttpTransport`]'s (its connections, pool, statuses, tokens); the stream is
//! read here, on its own connection, with the crate's SSE parser. Each answer is handed on
//! as a message of the stream's exchange, so the correlator pairs it by id.
//!
//! Ends (docs/metrics.md): a POST refused with a status ends its request as over Streamable
//! HTTP (a POST's body that is not JSON, such as a 202's text, is no message); a request answered 202 whose stream then ends is `missing` (never sent again); a
//! POST answered 404 is `session_lost`, and the session is opened anew (a new stream and
//! `initialize`) and the request retried in it once, as legacy Streamable HTTP sessions are.

use super::client::{HttpClient, RequestHead};
use super::stream::{SessionStream, Yield, stream_exchange};
use super::{HttpOptions, HttpTransport, LegacyInit};
use crate::jsonrpc::{Id, response_id};
use crate::metrics::{Counters, LatencyHistogram};
use crate::transport::sse::SseEvent;
use crate::transport::{
    BodyKind, Cancelled, Event, ExchangeId, McpHeaders, Outgoing, RetryCause, Transport,
    TransportCounters, TransportError, Unreadable,
};
use bytes::Bytes;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A request whose answer is awaited on a stream: held for a session, POSTed, or answered
/// 202.
struct Awaited {
    /// The session it was POSTed in (`None`: held for one).
    generation: Option<u64>,
    /// Its POST was answered 2xx: the server has it, its answer comes on that session's
    /// stream or never.
    accepted: bool,
    body: Bytes,
    headers: McpHeaders,
    /// It is a retry already: a second loss ends it.
    retried: bool,
}

/// Where the session is.
enum Phase {
    /// The newest stream is open and named its endpoint; `initialize` (if re-opening) done.
    Open,
    /// The newest stream is waiting for its `endpoint` event.
    Connecting,
    /// Re-opening: `initialize` is out (its exchange), its answer awaited on the stream.
    Initializing(Option<ExchangeId>),
}

/// The legacy HTTP+SSE transport. See [`Transport`].
pub struct LegacySseTransport {
    /// Where the stream is opened (the URL given).
    stream_client: HttpClient,
    opts: HttpOptions,
    /// The POSTs, to the endpoint of the session in use.
    posts: HttpTransport,
    /// The session's stream, and older ones still delivering answers, newest last.
    streams: Vec<SessionStream>,
    generation: u64,
    phase: Phase,
    /// Sends waiting for a session.
    held: Vec<Outgoing>,
    awaited: FxHashMap<Id, Awaited>,
    /// What opening a new session takes, once the handshake told it.
    legacy_init: Option<LegacyInit>,
    restart_began: tokio::time::Instant,
    ready: VecDeque<Event>,
    counters: TransportCounters,
    handed: Counters,
    /// A stream that could not be opened: its error, for the first ever stream (detection).
    failed: Option<TransportError>,
}

impl std::fmt::Debug for LegacySseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacySseTransport")
            .field("url", self.stream_client.url())
            .field("generation", &self.generation)
            .field("awaited", &self.awaited.len())
            .finish_non_exhaustive()
    }
}

/// The id of the `initialize` a session re-opening sends.
const REINIT_ID: &str = "mcpload-initialize";

impl HttpTransport {
    /// POSTs go to `client`'s URL from now on (a legacy HTTP+SSE session's endpoint, which
    /// names the session: a 404 to any of them is `session_lost`, counted here).
    fn retarget(&mut self, client: HttpClient) {
        self.client = client;
        self.session_in_url = true;
        self.encode_head();
    }
}

impl LegacySseTransport {
    /// A transport whose stream is opened at `client`'s URL, at once.
    pub fn new(client: HttpClient, opts: &HttpOptions) -> Self {
        let mut t = Self::unopened(client, opts);
        t.open_stream();
        t
    }

    fn unopened(client: HttpClient, opts: &HttpOptions) -> Self {
        LegacySseTransport {
            posts: HttpTransport::new(client.clone(), opts),
            stream_client: client,
            opts: opts.clone(),
            streams: Vec::new(),
            generation: 0,
            phase: Phase::Connecting,
            held: Vec::new(),
            awaited: FxHashMap::default(),
            legacy_init: None,
            restart_began: tokio::time::Instant::now(),
            ready: VecDeque::new(),
            counters: TransportCounters::default(),
            handed: Counters::default(),
            failed: None,
        }
    }

    pub fn url(&self) -> &http::Uri {
        self.stream_client.url()
    }

    /// Re-opening a lost session takes `init` (`initialize`, then `notifications/initialized`).
    pub fn set_legacy_init(&mut self, init: LegacyInit) {
        self.legacy_init = Some(init);
    }

    /// Waits until the first stream named its endpoint: `Err` when it did not within
    /// `wait` (the GET refused, no event stream, another first event). What the stream
    /// brought meanwhile stays ready.
    pub async fn connected(&mut self, wait: Duration) -> Result<(), TransportError> {
        let deadline = tokio::time::Instant::now() + wait;
        let connecting = std::future::poll_fn(|cx| {
            while matches!(self.phase, Phase::Connecting) && self.failed.is_none() {
                match self.poll_streams(cx) {
                    Poll::Ready(event) => self.ready.push_back(event),
                    Poll::Pending => return Poll::Pending,
                }
            }
            Poll::Ready(())
        });
        if tokio::time::timeout_at(deadline, connecting).await.is_err() {
            return Err(TransportError::Timeout(format!(
                "no endpoint event on the stream within {wait:?}"
            )));
        }
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn open_stream(&mut self) {
        self.generation += 1;
        self.phase = Phase::Connecting;
        let head = RequestHead::new(&self.stream_client, None, None, self.posts.authorization());
        let stream = SessionStream::open(
            &self.stream_client,
            head,
            self.generation,
            self.opts.max_message_bytes,
            self.opts.answer_budget.clone(),
            true,
        );
        self.streams.push(stream);
    }

    /// Opens a new session after a loss (once per loss of the session in use).
    fn restart(&mut self) {
        if !matches!(self.phase, Phase::Open) {
            return;
        }
        self.restart_began = tokio::time::Instant::now();
        self.open_stream();
    }

    fn post(&mut self, out: Outgoing, retried: bool) {
        for id in &out.ids {
            let awaited = Awaited {
                generation: Some(self.generation),
                accepted: false,
                body: out.body.clone(),
                headers: out.headers.clone(),
                retried,
            };
            self.awaited.insert(id.clone(), awaited);
        }
        self.posts.send(out);
    }

    /// The stream `generation` named its endpoint: POSTs go there now; a re-opened session
    /// sends `initialize`.
    fn on_endpoint(&mut self, generation: u64, data: &[u8]) {
        if generation != self.generation || !matches!(self.phase, Phase::Connecting) {
            return;
        }
        let target = std::str::from_utf8(data)
            .map_err(|_| TransportError::Invalid("endpoint is not UTF-8".into()))
            .and_then(|e| self.endpoint_path(e.trim()))
            .and_then(|path| self.stream_client.at_path(&path));
        let client = match target {
            Ok(client) => client,
            Err(e) => return self.session_failed(e),
        };
        self.posts.retarget(client);
        match &self.legacy_init {
            Some(init) if self.generation > 1 => {
                let body = init.initialize.clone();
                let timeout = self
                    .opts
                    .exchange_timeout
                    .unwrap_or(Duration::from_secs(30));
                let ex = self.posts.post(body, &McpHeaders::default(), timeout);
                self.phase = Phase::Initializing(Some(ex));
            }
            _ => self.session_open(),
        }
    }

    /// The path and query to POST to, from the endpoint event's data: a path, or a URL on
    /// the stream's origin, or a path relative to the stream's.
    fn endpoint_path(&self, endpoint: &str) -> Result<String, TransportError> {
        let base = self.stream_client.url();
        if endpoint.starts_with('/') {
            return Ok(endpoint.to_owned());
        }
        if let Ok(url) = endpoint.parse::<http::Uri>()
            && url.scheme().is_some()
        {
            if url.authority() != base.authority() || url.scheme() != base.scheme() {
                return Err(TransportError::Invalid(format!(
                    "the endpoint {endpoint} is on another origin than the stream {base}"
                )));
            }
            return Ok(url.path_and_query().map_or("/", |p| p.as_str()).to_owned());
        }
        let dir = base.path().rsplit_once('/').map_or("", |(dir, _)| dir);
        Ok(format!("{dir}/{endpoint}"))
    }

    /// The session is ready: what waited for it goes out.
    fn session_open(&mut self) {
        let reopened = self.generation > 1;
        self.phase = Phase::Open;
        if reopened {
            if let Some(init) = &self.legacy_init {
                let initialized = init.initialized.clone();
                self.posts.post_quietly(initialized);
            }
            self.counters.reinitializations += 1;
            self.count_restart_time();
        }
        for out in std::mem::take(&mut self.held) {
            let retried = out.ids.iter().any(|id| self.retry_pending(id));
            self.post(out, retried);
        }
    }

    fn retry_pending(&self, id: &Id) -> bool {
        self.awaited.get(id).is_some_and(|a| a.retried)
    }

    fn count_restart_time(&mut self) {
        let took = self.restart_began.elapsed();
        self.counters.reinit_time += took;
        self.counters.reinit_max = self.counters.reinit_max.max(took);
    }

    /// No usable session: what waited for it fails.
    fn session_failed(&mut self, error: TransportError) {
        if self.generation == 1 && self.failed.is_none() {
            self.failed = Some(error.clone());
        }
        if self.generation > 1 {
            self.counters.reinit_failed += 1;
            self.count_restart_time();
        }
        self.phase = Phase::Open;
        let held = std::mem::take(&mut self.held);
        for out in held {
            for id in &out.ids {
                self.awaited.remove(id);
            }
            self.ready.push_back(Event::Failed {
                exchange: None,
                ids: out.ids,
                error: TransportError::Session(error.to_string()),
            });
        }
    }

    /// Hands on what the streams bring: answers, and the end of each stream.
    fn poll_streams(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        let mut at = 0;
        while at < self.streams.len() {
            let stream = &mut self.streams[at];
            let (generation, exchange) = (stream.generation, stream.exchange);
            match stream.poll_next(cx) {
                Poll::Pending => at += 1,
                Poll::Ready(Yield::Event(_, SseEvent::Endpoint(data))) => {
                    self.on_endpoint(generation, &data);
                }
                Poll::Ready(Yield::Event(when, SseEvent::Data(bytes))) => {
                    if let Some(event) = self.on_message(generation, exchange, when, bytes) {
                        return Poll::Ready(event);
                    }
                }
                Poll::Ready(Yield::Event(when, SseEvent::Oversized)) => {
                    return Poll::Ready(Event::Unreadable {
                        exchange: Some(exchange),
                        at: when,
                        why: Unreadable::TooLarge,
                    });
                }
                Poll::Ready(Yield::End(error)) => {
                    self.streams.remove(at);
                    if let Some(event) = self.on_stream_end(generation, exchange, error) {
                        return Poll::Ready(event);
                    }
                }
            }
        }
        Poll::Pending
    }

    fn on_message(
        &mut self,
        generation: u64,
        exchange: ExchangeId,
        at: Instant,
        bytes: Bytes,
    ) -> Option<Event> {
        if generation == self.generation && matches!(self.phase, Phase::Connecting) {
            self.session_failed(TransportError::Request(
                "the stream's first event was no endpoint event".into(),
            ));
        }
        let id = response_id(&bytes);
        if let Phase::Initializing(_) = self.phase
            && generation == self.generation
            && id == Some(Id::Str(REINIT_ID.into()))
        {
            self.session_open();
            return None;
        }
        if let Some(id) = &id {
            self.awaited.remove(id);
        }
        Some(Event::Message {
            exchange: Some(exchange),
            batch: false,
            at,
            bytes,
        })
    }

    /// A stream ended: the requests still awaited on it are `missing`; the session in use
    /// is opened anew.
    fn on_stream_end(
        &mut self,
        generation: u64,
        exchange: ExchangeId,
        error: Option<TransportError>,
    ) -> Option<Event> {
        if generation == self.generation {
            match self.phase {
                Phase::Connecting | Phase::Initializing(_) => {
                    let why = error.unwrap_or_else(|| {
                        TransportError::Request("the stream ended before the session opened".into())
                    });
                    self.session_failed(why);
                }
                Phase::Open => {
                    self.restart_began = tokio::time::Instant::now();
                    self.open_stream();
                }
            }
        }
        let ids: Vec<Id> = self
            .awaited
            .iter()
            .filter(|(_, a)| a.accepted && a.generation == Some(generation))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            self.awaited.remove(id);
        }
        (!ids.is_empty()).then_some(Event::Closed {
            exchange,
            ids,
            batch: false,
            status: 200,
            body: BodyKind::Sse,
        })
    }

    /// What a POST's exchange reported. An accepted POST ends nothing (its answer comes on
    /// the stream); a refusal ends its requests; a 404 is the session lost.
    fn on_post_event(&mut self, event: Event) -> Option<Event> {
        match event {
            // The 202's body ("Accepted" as text from the Python SDK) is no JSON-RPC.
            Event::Closed { ids, .. } => {
                for id in &ids {
                    if let Some(a) = self.awaited.get_mut(id) {
                        a.accepted = true;
                    }
                }
                None
            }
            Event::Unreadable {
                why: Unreadable::UnexpectedContentType,
                ..
            } => None,
            Event::Refused {
                exchange,
                ids,
                status: 404,
                ..
            } => {
                // Counted `session_lost` by the POSTs' transport.
                let lost_generation = ids
                    .first()
                    .and_then(|id| self.awaited.get(id))
                    .and_then(|a| a.generation)
                    .unwrap_or(self.generation);
                if lost_generation == self.generation {
                    self.restart();
                }
                let retriable = ids.len() == 1 && !self.retry_pending(&ids[0]);
                if !retriable {
                    for id in &ids {
                        self.awaited.remove(id);
                    }
                    return Some(Event::Refused {
                        exchange,
                        ids,
                        batch: false,
                        status: 404,
                        retry_after_s: None,
                        batch_rejected: false,
                        error_code: None,
                    });
                }
                let awaited = self.awaited.get_mut(&ids[0])?;
                awaited.retried = true;
                let out = Outgoing::single(
                    awaited.body.clone(),
                    Some(ids[0].clone()),
                    awaited.headers.clone(),
                );
                self.counters.retries_session += 1;
                self.send_when_open(out);
                Some(Event::Retried {
                    exchange,
                    ids,
                    cause: RetryCause::Session,
                })
            }
            Event::Refused { ref ids, .. } | Event::Failed { ref ids, .. } => {
                for id in ids {
                    self.awaited.remove(id);
                }
                Some(event)
            }
            other => Some(other),
        }
    }

    fn send_when_open(&mut self, out: Outgoing) {
        if matches!(self.phase, Phase::Open) {
            let retried = out.ids.iter().any(|id| self.retry_pending(id));
            self.post(out, retried);
            return;
        }
        // Not in any session until it is POSTed: no stream's end concerns it.
        for id in &out.ids {
            if let Some(a) = self.awaited.get_mut(id) {
                a.generation = None;
                a.accepted = false;
            }
        }
        self.held.push(out);
    }

    /// The `initialize` of a re-opening session was refused or failed.
    fn poll_reinit(&mut self, cx: &mut Context<'_>) {
        let Phase::Initializing(Some(ex)) = self.phase else {
            return;
        };
        if let Poll::Ready(reply) = self.posts.poll_reply(cx, ex) {
            match reply {
                Ok(r) if r.status < 300 => self.phase = Phase::Initializing(None),
                Ok(r) => self.session_failed(TransportError::Session(format!(
                    "initialize answered HTTP {}",
                    r.status
                ))),
                Err(e) => self.session_failed(e),
            }
        }
    }
}

impl Transport for LegacySseTransport {
    fn send(&mut self, out: Outgoing) -> ExchangeId {
        // The answer comes on the session's stream, whatever POST carried the request.
        self.send_when_open(out);
        stream_exchange(self.generation)
    }

    fn cancel(&mut self, id: &Id) -> Cancelled {
        if let Some(at) = self.held.iter().position(|o| o.ids.contains(id)) {
            self.held.remove(at);
            self.awaited.remove(id);
            return Cancelled::Unsent;
        }
        self.awaited.remove(id);
        self.posts.cancel(id)
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Poll::Ready(event);
            }
            self.poll_reinit(cx);
            if let Poll::Ready(event) = self.poll_streams(cx) {
                return Poll::Ready(event);
            }
            if !self.ready.is_empty() {
                continue;
            }
            match self.posts.poll_event(cx) {
                Poll::Ready(event) => {
                    if let Some(event) = self.on_post_event(event) {
                        return Poll::Ready(event);
                    }
                }
                Poll::Pending if self.ready.is_empty() => return Poll::Pending,
                Poll::Pending => {}
            }
        }
    }

    /// POSTs not yet answered, requests answered 202 whose answer is awaited, requests held
    /// for a session, and a session being opened (a drain waits for it).
    fn open_exchanges(&self) -> usize {
        let opening = !matches!(self.phase, Phase::Open);
        self.posts.open_exchanges() + self.awaited.len() + self.held.len() + usize::from(opening)
    }

    fn take_counters(&mut self, into: &mut Counters) {
        self.counters.hand_over(into, &mut self.handed);
        self.posts.take_counters(into);
    }

    fn take_token_fetches(&mut self, into: &mut LatencyHistogram) {
        self.posts.take_token_fetches(into);
    }

    fn add_totals(&self, into: &mut Counters) {
        *into += &self.handed;
        self.counters.clone().drain_into(into);
        self.posts.add_totals(into);
    }

    async fn close(&mut self) {
        self.streams.clear();
        self.held.clear();
        self.awaited.clear();
        self.posts.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport(url: &str) -> LegacySseTransport {
        let opts = HttpOptions::default();
        let client = HttpClient::new(&url.parse().unwrap(), &opts).unwrap();
        LegacySseTransport::unopened(client, &opts)
    }

    #[tokio::test]
    async fn endpoints_resolve_against_the_stream_url() {
        let t = transport("http://127.0.0.1:9/mcp/sse");
        let path = |e: &str| t.endpoint_path(e);
        assert_eq!(
            path("/messages/?session_id=a").unwrap(),
            "/messages/?session_id=a"
        );
        assert_eq!(
            path("messages?session_id=a").unwrap(),
            "/mcp/messages?session_id=a"
        );
        assert_eq!(
            path("http://127.0.0.1:9/m?s=1").unwrap(),
            "/m?s=1",
            "a URL on the same origin"
        );
        assert!(path("http://10.0.0.1:9/m").is_err(), "another origin");
    }
}
