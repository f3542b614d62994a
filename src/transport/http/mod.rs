//! Streamable HTTP over the transport's own HTTP/1.1 connections, plain TCP for `http://`
//! and rustls for `https://`: one POST per message or batch, answered by one JSON body or an
//! SSE stream read incrementally; every exchange in flight is a stream polled by the owning
//! worker task (no task per request, no channel, no lock). Everything a transport sends to its
//! target (the load, the handshake, probes, cancel notifications, a legacy session's
//! re-initialization and DELETE) goes over the same connections, at most
//! [`HttpOptions::pool_size`] of them. 2026-07-28 requests carry `Mcp-Method` / `Mcp-Name`,
//! and a cancel closes their stream. HTTP/2 is not spoken.
//!
//! The parts: `client` (the target, TLS, request heads), `pool` (a transport's connections
//! and their limit), `connection` (one HTTP/1.1 connection), `exchange` (one request and its
//! answer), `body` (framing, and bodies into JSON texts), `side` (requests beside the load,
//! answered whole), `session` (legacy sessions), `bearer` (the tokens requests carry: shared,
//! or one per virtual user); `legacy_sse` is the HTTP+SSE transport of 2024-11-05 on top.

mod bearer;
mod body;
mod client;
mod connection;
mod exchange;
mod legacy_sse;
mod pool;
#[cfg(any(test, fuzzing))]
mod scripted;
mod session;
mod side;
mod stream;

pub use client::{DEFAULT_CONNECT_TIMEOUT, HttpClient, HttpOptions, TlsOptions};
pub use legacy_sse::LegacySseTransport;
pub use pool::OpenConnections;
#[cfg(fuzzing)]
pub use scripted::read_answer as read_scripted_answer;
pub use session::LegacyInit;
pub use side::Reply;

use super::auth::{Challenge, Credentials, Refusal};
use super::budget::AnswerBudget;
use super::sse::SseEvent;
use super::{
    CancelStyle, Cancelled, Event, ExchangeId, Outgoing, RetryCause, Transport, TransportCounters,
    TransportError, Unreadable, cancel_notification,
};
use crate::jsonrpc::Id;
use crate::metrics::{Counters, LatencyHistogram};
use bearer::{Bearers, Checked};
use client::RequestHead;
use connection::Connection;
use exchange::{Exchange, Flow, Item, Phase, Request, SessionWatch};
use futures_util::StreamExt;
use futures_util::stream::{AbortHandle, Abortable, SelectAll};
use http::{HeaderValue, Uri};
use pool::Pool;
use rustc_hash::FxHashMap;
use side::Side;
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use stream::{SessionStream, Yield};

/// The Streamable HTTP transport. See [`super::Transport`].
pub struct HttpTransport {
    client: HttpClient,
    /// The head every request starts with (version and session included).
    head: RequestHead,
    max_message_bytes: usize,
    answer_budget: AnswerBudget,
    exchange_timeout: Option<Duration>,
    protocol_version: Option<HeaderValue>,
    session: Option<HeaderValue>,
    /// Bumped when the session is replaced; a 404 from an older session is no news.
    generation: u64,
    legacy_init: Option<Arc<LegacyInit>>,
    restarting: bool,
    /// When the restart in progress began.
    restart_began: tokio::time::Instant,
    /// Load requests waiting for the restart to end (each sent then in the new session).
    held: Vec<Request>,
    /// Every HTTP 400 to a request that carried the session says it is gone.
    session_lost_on_400: bool,
    /// Every request names the session in its URL (the legacy HTTP+SSE transport): a 404
    /// says it is gone.
    session_in_url: bool,
    cancel_style: CancelStyle,
    /// Abort handles of single-request exchanges, by request id (`CloseStream` only).
    streams: FxHashMap<Id, (ExchangeId, AbortHandle)>,
    /// Timed-out requests whose streams are kept open for a late answer, oldest first.
    lingering: VecDeque<Id>,
    exchanges: SelectAll<Flow>,
    pool: Pool,
    /// The side exchanges whose answer someone wants.
    side: Vec<(ExchangeId, Side)>,
    /// Load exchanges sent and not yet ended.
    open: usize,
    next_exchange: u64,
    ready: VecDeque<Event>,
    counters: TransportCounters,
    /// What `counters` handed over so far.
    handed: Counters,
    /// The tokens requests carry, when they carry one: the run's shared one (its
    /// `Authorization` in `head`), and with `token_per_user` each virtual user's.
    auth: Option<Bearers>,
    /// Token fetch times taken from the credentials, for [`Transport::take_token_fetches`].
    fetch_times: LatencyHistogram,
    /// Each session gets a standalone GET stream, where the server sends requests of its own
    /// ([`HttpTransport::listen_for_server_requests`]).
    listen: bool,
    /// The session's standalone stream, while it is open.
    listener: Option<SessionStream>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Headers may hold secrets: only the shape is shown.
        f.debug_struct("HttpTransport")
            .field("url", self.client.url())
            .field("session", &self.session.is_some())
            .field("open", &self.open)
            .finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// A transport to `client`'s target, with at most `opts.pool_size` connections open.
    pub fn new(client: HttpClient, opts: &HttpOptions) -> Self {
        HttpTransport {
            head: RequestHead::new(&client, None, None, None),
            auth: client.auth().cloned().map(Bearers::new),
            client,
            max_message_bytes: opts.max_message_bytes,
            answer_budget: opts.answer_budget.clone(),
            exchange_timeout: opts.exchange_timeout,
            protocol_version: None,
            session: None,
            generation: 0,
            legacy_init: None,
            restarting: false,
            restart_began: tokio::time::Instant::now(),
            held: Vec::new(),
            session_lost_on_400: opts.session_lost_on_400,
            session_in_url: false,
            cancel_style: CancelStyle::Notify,
            streams: FxHashMap::default(),
            lingering: VecDeque::new(),
            exchanges: SelectAll::new(),
            pool: Pool::new(opts.pool_size, opts.open_connections.clone()),
            side: Vec::new(),
            open: 0,
            next_exchange: 0,
            ready: VecDeque::new(),
            counters: TransportCounters::default(),
            handed: Counters::default(),
            fetch_times: LatencyHistogram::default(),
            listen: false,
            listener: None,
        }
    }

    /// The generation of the shared token requests carry now (0: none).
    pub fn token(&self) -> u64 {
        self.auth.as_ref().map_or(0, |a| a.shared.token)
    }

    /// The credentials requests carry, if any (with `token_per_user`, user 0's: the
    /// handshake's and side requests').
    pub fn credentials(&self) -> Option<&Credentials> {
        self.auth.as_ref().map(|a| &a.shared.creds)
    }

    /// The shared token's `Authorization` value.
    fn authorization(&self) -> Option<&HeaderValue> {
        self.auth.as_ref()?.shared.authorization.as_ref()
    }

    pub fn url(&self) -> &Uri {
        self.client.url()
    }

    /// The `MCP-Protocol-Version` header sent on every request (`None`: not sent).
    pub fn set_protocol_version(&mut self, version: Option<&str>) {
        self.protocol_version = version.and_then(|v| HeaderValue::from_str(v).ok());
        self.encode_head();
    }

    /// The session id echoed on every request.
    pub fn set_session(&mut self, session: Option<HeaderValue>) {
        self.session = session;
        self.generation += 1;
        self.encode_head();
        self.listener = None;
        self.open_listener();
    }

    /// From now on each legacy session (one with an `Mcp-Session-Id`) gets a standalone GET
    /// stream, opened now for the session in use and anew for each later one: a server sends
    /// its requests that belong to no call there (2025-03-26 to 2025-11-25, transports page,
    /// "Listening for Messages from the Server"). Its messages are handed on as the stream's
    /// exchange's. A stream refused (405: the server offers none) or ended is not opened
    /// again in the same session.
    pub fn listen_for_server_requests(&mut self) {
        self.listen = true;
        if self.listener.is_none() {
            self.open_listener();
        }
    }

    /// Waits up to `wait` until the standalone stream's head came: true when it is open (a
    /// server that sends its requests only where a stream is listening finds it there).
    pub async fn listening(&mut self, wait: Duration) -> bool {
        let Some(stream) = &mut self.listener else {
            return false;
        };
        let open = tokio::time::timeout(wait, std::future::poll_fn(|cx| stream.poll_open(cx)));
        let open = open.await.unwrap_or(false);
        if !open {
            self.listener = None;
        }
        open
    }

    fn open_listener(&mut self) {
        if !self.listen || self.session.is_none() || self.session_in_url {
            return;
        }
        // The transport's own head: the session's id, its version and the shared token.
        let head = self.head.clone();
        let budget = self.answer_budget.clone();
        let max = self.max_message_bytes;
        let stream = SessionStream::open(&self.client, head, self.generation, max, budget, false);
        self.listener = Some(stream);
    }

    /// What the standalone stream brings: its messages, and its end (after which it is
    /// gone).
    fn poll_listener(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        let Some(stream) = &mut self.listener else {
            return Poll::Pending;
        };
        let exchange = stream.exchange;
        loop {
            match stream.poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Yield::Event(at, SseEvent::Data(bytes))) => {
                    return Poll::Ready(Event::Message {
                        exchange: Some(exchange),
                        batch: false,
                        at,
                        bytes,
                    });
                }
                Poll::Ready(Yield::Event(at, SseEvent::Oversized)) => {
                    return Poll::Ready(Event::Unreadable {
                        exchange: Some(exchange),
                        at,
                        why: Unreadable::TooLarge,
                    });
                }
                Poll::Ready(Yield::Event(..)) => {}
                Poll::Ready(Yield::End(_)) => {
                    self.listener = None;
                    return Poll::Pending;
                }
            }
        }
    }

    pub fn session(&self) -> Option<&HeaderValue> {
        self.session.as_ref()
    }

    /// Enables re-initialization when the server says the session is gone (and the retry
    /// of the requests it refused for it).
    pub fn set_legacy_init(&mut self, init: LegacyInit) {
        self.legacy_init = Some(Arc::new(init));
    }

    pub fn set_cancel_style(&mut self, style: CancelStyle) {
        self.cancel_style = style;
    }

    /// Encodes the heads again, the transport's and every user's (the version or the
    /// session changed).
    fn encode_head(&mut self) {
        self.head = RequestHead::new(
            &self.client,
            self.protocol_version.as_ref(),
            self.session.as_ref(),
            self.authorization(),
        );
        let users = self
            .auth
            .as_ref()
            .map(|a| a.users.keys().copied().collect::<Vec<_>>());
        for user in users.into_iter().flatten() {
            self.encode_head_of(Some(user));
        }
    }

    /// Encodes again the head that carries `user`'s token (its token changed).
    fn encode_head_of(&mut self, user: Option<u32>) {
        let (version, session) = (self.protocol_version.as_ref(), self.session.as_ref());
        match (user, &mut self.auth) {
            (Some(u), Some(auth)) if auth.users.contains_key(&u) => {
                let own = auth.users.get_mut(&u).expect("a user's token");
                let authorization = own.bearer.authorization.as_ref();
                own.head = RequestHead::new(&self.client, version, session, authorization);
            }
            _ => self.head = RequestHead::new(&self.client, version, session, self.authorization()),
        }
    }

    fn next_exchange(&mut self) -> ExchangeId {
        let ex = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        ex
    }

    /// Sends a request on an idle connection; with none idle it waits for the first
    /// connection free, one opened for the requests waiting or one whose answer was read
    /// (its time limit runs from `request.since` all the same). An idle connection found
    /// closed before any byte of the request was written is dropped, and the request goes on
    /// another one, counted in `reconnects_before_send`.
    fn launch(&mut self, request: Request) {
        let Some(request) = self.authorize(request) else {
            return;
        };
        let user = self.auth.as_ref().and_then(|a| a.own(request.out.user));
        let own_head = self.auth.as_ref().and_then(|a| a.head(user));
        let head = request.head.as_deref().or(own_head).unwrap_or(&self.head);
        let out = &request.out;
        let resume = request.last_event_id.as_ref();
        let encode =
            |w: &mut Vec<u8>| head.encode(request.method, &out.headers, resume, &out.body, w);
        let mut found_closed = false;
        let conn = loop {
            let Some(mut conn) = self.pool.take_idle() else {
                break None;
            };
            if conn.reuse(encode) {
                break Some(conn);
            }
            found_closed = true;
            self.pool.put_back(None);
        };
        self.counters.reconnects_before_send += u64::from(found_closed);
        let Some(conn) = conn else {
            self.pool.wait(request);
            self.dial_for_waiting();
            return;
        };
        self.start_exchange(request, Phase::Head(conn));
    }

    /// Opens connections for the requests waiting (as many as wait, a few at a time); with
    /// the pool full and more waiting than are being opened, frees a lingering one.
    fn dial_for_waiting(&mut self) {
        while self.pool.dial_one() {
            self.exchanges
                .push(Flow::Dial(Some(Box::pin(self.client.connect()))));
        }
        self.free_a_lingering_connection();
    }

    /// A connection opened for the requests waiting serves the longest waiting; if it could
    /// not be opened, that request fails with why (each request waiting has its dial). The
    /// next dial starts for those still waiting.
    fn on_dialed(&mut self, dialed: Result<Connection, TransportError>) {
        self.pool.dialed();
        let request = self.pool.next_waiting();
        match (dialed, request) {
            (Ok(conn), request) => {
                self.pool.put_back(Some(conn));
                if let Some(request) = request {
                    self.launch(request);
                }
            }
            // Its exchange frees the room as it ends.
            (Err(error), Some(request)) => self.start_exchange(request, Phase::Unconnected(error)),
            (Err(_), None) => self.pool.put_back(None),
        }
        self.dial_for_waiting();
    }

    /// Starts the exchange of `request` in `phase`: among the exchanges polled, closable by
    /// its id when it is a single load request.
    fn start_exchange(&mut self, request: Request, phase: Phase) {
        let user = self.auth.as_ref().and_then(|a| a.own(request.out.user));
        let carries_session = self.session_in_url
            || request
                .head
                .as_ref()
                .map_or(self.head.session, |h| h.session);
        let watch = carries_session.then_some(SessionWatch {
            any_400: self.session_lost_on_400,
        });
        let exchange = request.exchange;
        // A single request's stream is closed to cancel it (2026-07-28), or to free its
        // connection for the requests behind it.
        let closable = (request.is_load() && !request.out.batch && request.out.ids.len() == 1)
            .then(|| request.out.ids[0].clone());
        let is_load = request.is_load();
        let mut ex = Box::new(Exchange::new(
            request,
            phase,
            self.generation,
            self.max_message_bytes,
            Some(self.answer_budget.clone()),
            closable.clone(),
            watch,
        ));
        if let Some(auth) = &self.auth {
            ex = ex.with_token(user, auth.find(user).token);
        }
        let flow = if let Some(id) = closable {
            let (handle, reg) = AbortHandle::new_pair();
            self.streams.insert(id, (exchange, handle));
            Flow::Abortable(Abortable::new(ex, reg))
        } else if let Some(reg) = (!is_load).then(|| self.running(exchange)).flatten() {
            Flow::Abortable(Abortable::new(ex, reg))
        } else {
            Flow::Plain(ex)
        };
        self.exchanges.push(flow);
    }

    /// The request, when it may go out now with its token (its head brought up to date);
    /// `None` when it was held for a token being fetched, or failed for want of one. A
    /// user's first request makes its token known to the transport.
    fn authorize(&mut self, request: Request) -> Option<Request> {
        let Some(auth) = &mut self.auth else {
            return Some(request);
        };
        let user = auth.own(request.out.user);
        if let Some(u) = user {
            let (version, session) = (self.protocol_version.as_ref(), self.session.as_ref());
            auth.add_user(u, || RequestHead::new(&self.client, version, session, None));
        }
        let bearer = auth.get(user);
        match bearer.check(tokio::time::Instant::now()) {
            Checked::Go { renewed } => {
                if renewed {
                    self.encode_head_of(user);
                }
                Some(request)
            }
            Checked::Hold(news) => {
                bearer.held.push(request);
                if let Some(news) = news {
                    self.exchanges.push(Flow::Token(user, Some(news)));
                }
                None
            }
            Checked::Failed(why) => {
                let error = TransportError::Auth(why.to_string());
                if request.is_load() {
                    self.open -= 1;
                    self.counters.auth_failures += request.out.ids.len() as u64;
                    self.ready.push_back(Event::Failed {
                        exchange: Some(request.exchange),
                        ids: request.out.ids,
                        error,
                    });
                } else {
                    self.on_reply(request.exchange, Err(error));
                }
                None
            }
        }
    }

    /// Drops `exchange`'s entry among the streams that can be closed to cancel (the id may
    /// already belong to a newer exchange, once answered).
    fn forget_stream(&mut self, id: &Id, exchange: ExchangeId) {
        if self.streams.get(id).is_some_and(|(ex, _)| *ex == exchange) {
            self.streams.remove(id);
            self.lingering.retain(|l| l != id);
        }
    }

    /// Closes the stream of a timed-out request, and its connection with it: HTTP/1.1 has no
    /// other way to drop an answer.
    fn close_stream(&mut self, id: &Id) {
        if let Some((_, handle)) = self.streams.remove(id) {
            handle.abort();
            self.open -= 1;
            self.on_conn(None);
        }
    }

    /// While a request waits for a connection that no dial will bring (the pool is full), the
    /// oldest timed-out stream still open is closed so that the request goes out on a fresh
    /// connection.
    fn free_a_lingering_connection(&mut self) {
        while self.pool.is_starved()
            && let Some(id) = self.lingering.pop_front()
        {
            self.close_stream(&id);
        }
    }

    /// A connection came back (or closed): it serves the longest-waiting request.
    fn on_conn(&mut self, back: Option<Connection>) {
        self.pool.put_back(back);
        if let Some(request) = self.pool.next_waiting() {
            self.launch(request);
        }
    }

    /// Bookkeeping for what an exchange yielded; a load event is handed on.
    fn on_item(&mut self, item: Item) -> Option<Event> {
        match item {
            Item::Event(event) => {
                self.on_event(&event);
                return Some(event);
            }
            Item::Lost {
                event,
                generation,
                resend,
            } => {
                self.counters.session_lost += 1;
                self.on_event(&event);
                if self.legacy_init.is_some() && generation == self.generation && !self.restarting {
                    self.start_restart();
                }
                return Some(match resend {
                    Some(request) => self.retry(event, request, RetryCause::Session),
                    None => event,
                });
            }
            Item::Unauthorized {
                event,
                user,
                token,
                challenge,
                resend,
            } => {
                self.on_event(&event);
                let Some(auth) = &mut self.auth else {
                    return Some(event);
                };
                let challenge = challenge.as_deref().and_then(Challenge::parse);
                let scope = challenge
                    .as_ref()
                    .is_some_and(Challenge::insufficient_scope);
                let bearer = auth.get(user);
                let refusal = if scope {
                    bearer.creds.step_up(token, challenge)
                } else {
                    bearer.creds.refused(token, challenge)
                };
                bearer.stale();
                return Some(match (refusal, resend) {
                    (Refusal::Retry, Some(request)) => {
                        let cause = if scope {
                            RetryCause::Scope
                        } else {
                            RetryCause::Token
                        };
                        self.retry(event, request, cause)
                    }
                    // A 403 not stepped up is counted as a 403 (`http_403`) alone.
                    (_, _) if scope => event,
                    (_, _) => {
                        if let Event::Refused { ids, .. } = &event {
                            self.counters.auth_failures += ids.len() as u64;
                        }
                        event
                    }
                });
            }
            Item::TokenNews(user) => {
                let Some(auth) = &mut self.auth else {
                    return None;
                };
                let mut released = Vec::new();
                for request in auth.get(user).news_came() {
                    let held_load = request.is_load();
                    let ids = held_load.then(|| request.out.ids.clone());
                    let held = |t: &Self| t.auth.as_ref().map_or(0, |a| a.find(user).held.len());
                    let before = held(self);
                    self.launch(request);
                    // Sent (or failed) now, not held again.
                    if held(self) == before {
                        released.extend(ids.into_iter().flatten());
                    }
                }
                if !released.is_empty() {
                    return Some(Event::Released {
                        ids: released,
                        at: std::time::Instant::now(),
                    });
                }
            }
            Item::Conn {
                exchange,
                back,
                closable,
                accepted,
            } => {
                if let (Some((user, generation)), Some(auth)) = (accepted, &self.auth) {
                    auth.find(user).creds.accepted(generation);
                }
                if let Some(id) = closable {
                    self.forget_stream(&id, exchange);
                }
                self.answer_read(exchange);
                self.on_conn(back);
            }
            Item::Reply {
                exchange,
                reply,
                session_lost,
            } => {
                self.counters.session_lost += u64::from(session_lost);
                self.on_reply(exchange, *reply);
            }
            Item::Resume { request, delay } => {
                self.counters.sse_resumptions += 1;
                let at = request.resume_at(delay);
                self.exchanges.push(Flow::Resuming {
                    at: Box::pin(tokio::time::sleep_until(at)),
                    request: Some(request),
                });
            }
            // During a session restart it goes out with the session it belongs to gone:
            // refused, its id ends missing.
            Item::Due(request) => self.launch(*request),
            Item::Dialed(dialed) => self.on_dialed(dialed),
            Item::ResumeFailed => self.counters.sse_resumptions_failed += 1,
        }
        None
    }

    /// Bookkeeping for an event about to be handed over.
    fn on_event(&mut self, event: &Event) {
        let (exchange, ids) = match event {
            Event::Closed { exchange, ids, .. } | Event::Refused { exchange, ids, .. } => {
                (Some(*exchange), ids)
            }
            Event::Failed { exchange, ids, .. } => (*exchange, ids),
            _ => return,
        };
        self.open -= 1;
        if let Some(exchange) = exchange {
            for id in ids {
                self.forget_stream(id, exchange);
            }
        }
    }

    /// Sends `request` again, refused (`refused`) because its session is gone (in the new
    /// session: once the restart in progress is over, or now when the session was already
    /// replaced) or its token was refused (with a newer token, once there is one). The
    /// refusal becomes [`Event::Retried`].
    fn retry(&mut self, refused: Event, mut request: Box<Request>, cause: RetryCause) -> Event {
        let Event::Refused { exchange, ids, .. } = refused else {
            return refused;
        };
        request.exchange = self.next_exchange();
        self.open += 1;
        match cause {
            RetryCause::Session => self.counters.retries_session += 1,
            RetryCause::Token | RetryCause::Scope => self.counters.retries_token += 1,
        }
        if self.restarting {
            self.held.push(*request);
        } else {
            request.since = tokio::time::Instant::now();
            self.launch(*request);
        }
        Event::Retried {
            exchange,
            ids,
            cause,
        }
    }

    /// A load request about to be sent: one request alone may be sent again if its session
    /// turns out gone (sessions are the legacy era's, whose requests carry no headers of
    /// their own).
    fn load_request(&self, ex: ExchangeId, out: Outgoing) -> Request {
        let h = &out.headers;
        let retriable = self.legacy_init.is_some()
            && !out.batch
            && out.ids.len() == 1
            && h.method.is_none()
            && h.name.is_none()
            && h.params.is_none();
        let auth_retriable = self.auth.is_some() && !out.batch && out.ids.len() == 1;
        let mut request =
            Request::load(ex, out, self.exchange_timeout, tokio::time::Instant::now());
        request.retriable = retriable;
        request.auth_retriable = auth_retriable;
        request
    }
}

impl Transport for HttpTransport {
    fn send(&mut self, out: Outgoing) -> ExchangeId {
        let ex = self.next_exchange();
        self.open += 1;
        let request = self.load_request(ex, out);
        if self.restarting {
            self.held.push(request);
        } else {
            self.launch(request);
        }
        ex
    }

    fn cancel(&mut self, id: &Id) -> Cancelled {
        // Held for a session restart or a token: never sent.
        let held = self.held.iter().position(|r| r.is_single(id));
        if held.map(|at| self.held.remove(at)).is_some()
            || self.auth.as_mut().is_some_and(|a| a.withdraw(id))
        {
            self.open -= 1;
            return Cancelled::Unsent;
        }
        if let Some((_, dialed_for)) = self.pool.withdraw(|r| r.is_single(id)) {
            // Never sent: nothing to tell the server. One whose connection was being opened
            // counts as written: the connect is what the server was slow to take
            // (docs/metrics.md); the connection serves the next request when it opens.
            self.open -= 1;
            return if dialed_for {
                Cancelled::Sent
            } else {
                Cancelled::Unsent
            };
        }
        match self.cancel_style {
            CancelStyle::CloseStream => self.close_stream(id),
            CancelStyle::Notify => {
                // Its answer may still come (counted late) while its connection is not
                // needed: the stream lingers until a request waits for a connection.
                if self.streams.contains_key(id) {
                    self.lingering.push_back(id.clone());
                    self.free_a_lingering_connection();
                }
                self.post_quietly(cancel_notification(id));
            }
        }
        Cancelled::Sent
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Poll::Ready(ev);
            }
            if let Poll::Ready(ev) = self.poll_listener(cx) {
                return Poll::Ready(ev);
            }
            match self.exchanges.poll_next_unpin(cx) {
                Poll::Ready(Some(item)) => {
                    if let Some(event) = self.on_item(item) {
                        return Poll::Ready(event);
                    }
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
        self.counters.hand_over(into, &mut self.handed);
        for bearer in self.auth.iter().flat_map(Bearers::all) {
            bearer.creds.take_counts(into, &mut self.fetch_times);
        }
    }

    fn take_token_fetches(&mut self, into: &mut LatencyHistogram) {
        *into += &self.fetch_times;
        self.fetch_times.reset();
    }

    fn add_totals(&self, into: &mut Counters) {
        *into += &self.handed;
        self.counters.clone().drain_into(into);
    }

    async fn close(&mut self) {
        // A session restart in progress ends first: the server may have opened the new
        // session already, and the DELETE must end that one.
        self.finish_restart().await;
        // Every exchange in flight goes, with its connection; the idle ones stay for the
        // session's DELETE.
        self.exchanges = SelectAll::new();
        self.pool.keep_only_idle();
        self.streams.clear();
        self.lingering.clear();
        self.side.clear();
        self.held.clear();
        if let Some(auth) = &mut self.auth {
            auth.clear();
        }
        self.restarting = false;
        self.open = 0;
        self.end_session().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{McpHeaders, TransportError};
    use bytes::Bytes;
    use client::Method;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::SeqCst;

    /// A keep-alive server that counts its connections and the requests it read; a request
    /// whose body says `stall` gets the head and part of a body, then nothing more; one that
    /// says `last` is answered, then its connection closed; one that says `hang_up` is read,
    /// then its connection closed unanswered.
    async fn counting_server() -> (Uri, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        use crate::transport::wire_for_tests::read_request;
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(AtomicUsize::new(0));
        let (count, read) = (accepted.clone(), received.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                count.fetch_add(1, SeqCst);
                let read = read.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some((_, body)) = read_request(&mut sock, &mut buf).await {
                        read.fetch_add(1, SeqCst);
                        let says = |word: &[u8]| body.windows(word.len()).any(|w| w == word);
                        if says(b"hang_up") {
                            return;
                        }
                        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
                        let stall = says(b"stall");
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            if stall { 1000 } else { answer.len() }
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock
                            .write_all(if stall { &answer[..10] } else { answer })
                            .await;
                        if says(b"last") {
                            return;
                        }
                    }
                });
            }
        });
        (url, accepted, received)
    }

    /// Answers one request with a JSON `{}` result, kept alive (a write error is the test's
    /// client gone).
    async fn answer_empty_result(sock: &mut tokio::net::TcpStream) {
        use tokio::io::AsyncWriteExt;
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        let _ = sock.write_all(head.as_bytes()).await;
        let _ = sock.write_all(answer).await;
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
        let (url, accepted, _) = counting_server().await;
        let opts = HttpOptions::default();
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
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
        assert_eq!(t.pool.counts(), (1, 1));
        assert!(matches!(
            exchange(&mut t, ping).await,
            Event::Closed { status: 200, .. }
        ));
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn own_requests_carry_each_header_once_with_mcploads_first() {
        use client::METHOD_HEADER;
        use http::header::{AUTHORIZATION, CONTENT_LENGTH, HOST};
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
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        t.set_protocol_version(Some("2026-07-28"));
        t.set_session(Some(value("s-1")));
        let encoded = |t: &HttpTransport, method: Option<HeaderValue>| {
            let mut w = Vec::new();
            let headers = McpHeaders {
                method,
                ..McpHeaders::default()
            };
            t.head.encode(Method::Post, &headers, None, b"{}", &mut w);
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
        let (url, accepted, _) = counting_server().await;
        let opts = HttpOptions {
            exchange_timeout: Some(Duration::from_millis(300)),
            ..HttpOptions::default()
        };
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
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

    /// Issue #11, defect 1: a keep-alive connection the server closed while idle is found
    /// closed before the next request is written, so that request goes out on a fresh
    /// connection and is counted apart, not as a transport error.
    #[tokio::test]
    async fn a_request_whose_idle_connection_was_closed_goes_out_on_a_fresh_one() {
        let (url, accepted, received) = counting_server().await;
        let opts = HttpOptions::default();
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        let last: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"last"}"#;
        assert!(matches!(
            exchange(&mut t, last).await,
            Event::Closed { status: 200, .. }
        ));
        // The server's close arrives on its own time: look until it shows, within a bound.
        let seen = async {
            while t.pool.idle_reusable() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), seen)
            .await
            .expect("the server's close shows");
        let ping: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let ev = exchange(&mut t, ping).await;
        assert!(matches!(ev, Event::Closed { status: 200, .. }), "{ev:?}");
        assert_eq!((accepted.load(SeqCst), received.load(SeqCst)), (2, 2));
        let mut c = Counters::default();
        t.take_counters(&mut c);
        assert_eq!(c.reconnects_before_send, 1);
        assert_eq!(
            t.pool.counts(),
            (1, 1),
            "the closed one is no longer counted"
        );
    }

    /// Issue #13: a burst of sends finds many idle connections the server closed (10,000
    /// tasks' polls falling due together, after the target closed the connections idle for
    /// 30 s). Each is found closed, however many the burst takes in one turn of the task:
    /// tokio's cooperative budget (128 socket polls a turn) once made every look past it
    /// read as quiet, and those requests were written to closed connections and lost.
    #[tokio::test]
    async fn a_burst_finds_every_idle_connection_the_server_closed() {
        use crate::transport::wire_for_tests::read_request;
        const N: usize = 300;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        // Answers every request; the first N connections are closed after their one answer,
        // which waits until all N requests are in (so that none frees its connection for
        // another: the burst opens N).
        let closed = Arc::new(AtomicUsize::new(0));
        let counted = closed.clone();
        let all_in = Arc::new(tokio::sync::Barrier::new(N));
        tokio::spawn(async move {
            let mut accepted = 0;
            while let Ok((mut sock, _)) = listener.accept().await {
                accepted += 1;
                let close = (accepted <= N).then(|| (counted.clone(), all_in.clone()));
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while read_request(&mut sock, &mut buf).await.is_some() {
                        if let Some((_, all_in)) = &close {
                            all_in.wait().await;
                        }
                        answer_empty_result(&mut sock).await;
                        if let Some((c, _)) = &close {
                            drop(sock);
                            c.fetch_add(1, SeqCst);
                            return;
                        }
                    }
                });
            }
        });
        let opts = HttpOptions {
            pool_size: N,
            ..HttpOptions::default()
        };
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        let ping = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        let burst = |t: &mut HttpTransport| {
            for i in 0..N {
                t.send(Outgoing::single(
                    ping.clone(),
                    Some(Id::Num(i as i64)),
                    McpHeaders::default(),
                ));
            }
        };
        let answered = async |t: &mut HttpTransport| {
            let mut ok = 0;
            let mut ended = 0;
            while ended < N {
                let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
                    .await
                    .expect("an answer or a failure");
                match ev {
                    Event::Closed { status: 200, .. } => (ok, ended) = (ok + 1, ended + 1),
                    Event::Closed { .. } | Event::Failed { .. } => ended += 1,
                    _ => {}
                }
            }
            ok
        };
        // N connections at once, each answered, then closed by the server.
        burst(&mut t);
        assert_eq!(answered(&mut t).await, N);
        assert_eq!(t.pool.counts(), (N, N));
        let all_closed = async {
            while closed.load(SeqCst) < N {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // One more turn of the runtime, so that its reactor has seen every close.
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        tokio::time::timeout(Duration::from_secs(10), all_closed)
            .await
            .expect("the server closes them");
        // The next burst, sent in one turn, finds each closed and goes out on fresh ones.
        burst(&mut t);
        assert_eq!(
            answered(&mut t).await,
            N,
            "every request of the burst answered"
        );
        let mut c = Counters::default();
        t.take_counters(&mut c);
        assert_eq!(
            c.reconnects_before_send, 1,
            "found in the burst's first send"
        );
    }

    /// Issue #24: a request that finds every connection busy waits for the first one free,
    /// a new one or one whose answer was read. Each once waited on a dial of its own: at
    /// 20,000 arrivals a second from a cold start a burst opened a connection per arrival,
    /// past what the target accepts. Here no second connection can be opened (the target's
    /// accept queue is full, its SYNs dropped): the request behind the first is answered on
    /// the first connection, where it once failed at the connect timeout.
    #[tokio::test]
    async fn a_request_waiting_for_a_connection_takes_the_first_one_free() {
        use crate::transport::wire_for_tests::read_request;
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let url: Uri = format!("http://{addr}/mcp").parse().unwrap();
        let (accepted, first) = tokio::sync::oneshot::channel();
        // One connection accepted, and no other: every request on it answered.
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let _ = accepted.send(());
            let mut buf = Vec::new();
            while read_request(&mut sock, &mut buf).await.is_some() {
                answer_empty_result(&mut sock).await;
            }
            drop(listener);
        });
        let opts = HttpOptions::default();
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        let ping = |id| {
            let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
            Outgoing::single(body, Some(Id::Num(id)), McpHeaders::default())
        };
        t.send(ping(1));
        // The first request's dial is polled until its connection is accepted.
        tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                biased;
                _ = first => {}
                ev = t.next_event() => panic!("no event before the accept: {ev:?}"),
            }
        })
        .await
        .expect("the first connection is accepted");
        // The accept queue is filled: connects complete into it until one cannot.
        let mut queued = Vec::new();
        while let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(300),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            queued.push(s);
            assert!(queued.len() < 64, "the accept queue never filled");
        }
        t.send(ping(2));
        let mut answered = Vec::new();
        while answered.len() < 2 {
            let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
                .await
                .expect("an answer or a failure");
            match ev {
                Event::Closed {
                    status: 200, ids, ..
                } => answered.extend(ids),
                Event::Failed { ids, error, .. } => panic!("{ids:?} failed: {error}"),
                _ => {}
            }
        }
        assert_eq!(answered, [Id::Num(1), Id::Num(2)]);
        assert_eq!(t.pool.counts().1, 1, "the first connection, idle again");
    }

    /// Issue #11, defect 1: once a request is written, a connection that fails is the
    /// request's end (a POST sent again could take effect twice).
    #[tokio::test]
    async fn a_request_written_before_its_connection_closed_is_not_sent_again() {
        let (url, accepted, received) = counting_server().await;
        let opts = HttpOptions::default();
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        let ping: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(matches!(
            exchange(&mut t, ping).await,
            Event::Closed { status: 200, .. }
        ));
        let hang_up: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"hang_up"}"#;
        let ev = exchange(&mut t, hang_up).await;
        assert!(matches!(ev, Event::Failed { .. }), "{ev:?}");
        assert_eq!(
            (accepted.load(SeqCst), received.load(SeqCst)),
            (1, 2),
            "read once, on the connection it was written to"
        );
        let mut c = Counters::default();
        t.take_counters(&mut c);
        assert_eq!(c.reconnects_before_send, 0);
        assert_eq!(t.pool.counts(), (0, 0));
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
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
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

    /// A legacy MCP server over TLS on loopback: `initialize` opens session `s-1`, a
    /// notification gets 202, a call in the session its id back, DELETE 200. Counts the
    /// connections it accepts and the DELETEs.
    async fn tls_legacy_server() -> (
        Uri,
        rustls::ClientConfig,
        Arc<AtomicUsize>,
        Arc<AtomicUsize>,
    ) {
        use crate::transport::wire_for_tests::{read_request, self_signed_tls};
        use tokio::io::AsyncWriteExt;
        let (acceptor, client) = self_signed_tls();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let deletes = Arc::new(AtomicUsize::new(0));
        let (count, deleted) = (accepted.clone(), deletes.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, SeqCst);
                let (acceptor, deleted) = (acceptor.clone(), deleted.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = Vec::new();
                    while let Some((head, body)) = read_request(&mut tls, &mut buf).await {
                        let in_session = head.contains("mcp-session-id: s-1");
                        let msg: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        let (status, extra, answer) = if head.starts_with("delete") {
                            deleted.fetch_add(1, SeqCst);
                            ("200 OK", "", String::new())
                        } else if msg["method"] == "initialize" {
                            let result = serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "result": {}});
                            ("200 OK", "mcp-session-id: s-1\r\n", result.to_string())
                        } else if !in_session {
                            ("400 Bad Request", "", String::new())
                        } else if msg.get("id").is_none() {
                            ("202 Accepted", "", String::new())
                        } else {
                            let result = serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "result": {}});
                            ("200 OK", "", result.to_string())
                        };
                        let reply = format!(
                            "HTTP/1.1 {status}\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                            answer.len()
                        );
                        if tls.write_all(reply.as_bytes()).await.is_err()
                            || tls.flush().await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        (url, client, accepted, deletes)
    }

    /// The legacy handshake as the connector does it: `initialize` (answered 200 with one
    /// message and a session id), then `notifications/initialized` (202); re-initialization
    /// armed with both.
    pub(super) async fn open_legacy_session(t: &mut HttpTransport, wait: Duration) {
        let initialize =
            Bytes::from_static(br#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}}"#);
        let reply = t
            .post_once(initialize.clone(), &McpHeaders::default(), wait)
            .await
            .unwrap();
        assert_eq!((reply.status, reply.messages.len()), (200, 1), "{reply:?}");
        t.set_protocol_version(Some("2025-06-18"));
        t.set_session(reply.session_id);
        let initialized =
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let reply = t
            .post_once(initialized.clone(), &McpHeaders::default(), wait)
            .await
            .unwrap();
        assert_eq!(reply.status, 202);
        t.set_legacy_init(LegacyInit {
            initialize,
            initialized,
        });
    }

    #[tokio::test]
    async fn https_handshake_load_cancels_and_delete_stay_within_the_pool() {
        let (url, tls, accepted, deletes) = tls_legacy_server().await;
        let opts = HttpOptions {
            pool_size: 3,
            ..HttpOptions::default()
        };
        let client = HttpClient::with_tls(&url, &opts, Some(tls)).unwrap();
        let mut t = HttpTransport::new(client, &opts);
        let wait = Duration::from_secs(10);
        open_legacy_session(&mut t, wait).await;
        // 200 calls, 8 in flight: more than the pool, so some wait for a connection. Now and
        // then the newest call is given up: one still waiting is withdrawn unsent, one sent
        // gets a cancel notification (a side request, ahead of the load) and its stream is
        // closed once a call waits for its connection.
        let (mut sent, mut closed, mut messages) = (0, 0, 0);
        let (mut unsent, mut given_up) = (0, 0);
        while sent < 200 || t.open_exchanges() > 0 {
            while sent < 200 && t.open_exchanges() < 8 {
                let body = format!(r#"{{"jsonrpc":"2.0","id":{sent},"method":"ping"}}"#);
                let id = Id::Num(sent);
                t.send(Outgoing::single(
                    body.into(),
                    Some(id),
                    McpHeaders::default(),
                ));
                sent += 1;
            }
            let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
                .await
                .expect("an answer");
            match ev {
                Event::Message { .. } => messages += 1,
                Event::Closed { status: 200, .. } => {
                    closed += 1;
                    if closed % 50 == 0 {
                        given_up += 1;
                        if t.cancel(&Id::Num(sent - 1)) == Cancelled::Unsent {
                            unsent += 1;
                        }
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        // Every call ended once: answered, withdrawn, or its stream closed.
        assert!(
            (200 - given_up..=200 - unsent).contains(&closed),
            "{closed} answered, {given_up} given up of which {unsent} unsent"
        );
        assert!((closed..=200 - unsent).contains(&messages), "{messages}");
        t.close().await;
        assert_eq!(deletes.load(SeqCst), 1, "the session ends with DELETE");
        let opened = accepted.load(SeqCst);
        assert!(
            (1..=3).contains(&opened),
            "{opened} connections opened for a pool of 3"
        );
    }

    /// Issue #11, defects 5 and 7, in the legacy era (cancelled by notification): with the one
    /// connection held by a stuck answer, a request that times out while it waits is
    /// withdrawn, never sent; the stuck stream lingers until a request waits for its
    /// connection, then it is closed and that request goes out on a fresh one.
    #[tokio::test]
    async fn a_request_that_expires_waiting_is_never_sent_and_a_stuck_stream_makes_way() {
        let (url, accepted, received) = counting_server().await;
        let opts = HttpOptions {
            pool_size: 1,
            ..HttpOptions::default()
        };
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        let single = |id: i64, method: &str| {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#);
            Outgoing::single(body.into(), Some(Id::Num(id)), McpHeaders::default())
        };
        t.send(single(1, "stall"));
        t.send(single(2, "ping"));
        assert_eq!(t.open_exchanges(), 2);
        // The stuck answer's head comes; the transport is driven until the server has read
        // the first request (the second waits for the only connection).
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        while received.load(SeqCst) == 0 {
            assert!(
                tokio::time::Instant::now() < until,
                "the stall never arrived"
            );
            let quiet = tokio::time::timeout(Duration::from_millis(10), t.next_event()).await;
            assert!(
                quiet.is_err(),
                "no event before the stuck answer ends: {quiet:?}"
            );
        }
        // Both time out; the second never left.
        assert_eq!(t.cancel(&Id::Num(2)), Cancelled::Unsent);
        assert_eq!(t.open_exchanges(), 1);
        assert_eq!(t.cancel(&Id::Num(1)), Cancelled::Sent);
        // The cancel notification waits for the connection the stuck stream holds, so the
        // stream is closed and the notification goes out on a fresh connection; so does a
        // new request.
        t.send(single(3, "ping"));
        let ev = loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
                .await
                .expect("the third request is answered");
            if matches!(ev, Event::Closed { .. } | Event::Failed { .. }) {
                break ev;
            }
        };
        match ev {
            Event::Closed { ids, status, .. } => assert_eq!((ids, status), (vec![Id::Num(3)], 200)),
            other => panic!("{other:?}"),
        }
        assert_eq!(t.open_exchanges(), 0);
        assert_eq!(
            accepted.load(SeqCst),
            2,
            "the stuck connection and a fresh one"
        );
        // The stall, the notification and the third request: never the second.
        assert_eq!(received.load(SeqCst), 3);
    }

    #[tokio::test]
    async fn a_post_given_up_closes_its_stream_and_frees_its_connection() {
        let (url, _, _) = counting_server().await;
        let opts = HttpOptions {
            pool_size: 1,
            ..HttpOptions::default()
        };
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        let stall = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"stall"}"#);
        let wait = Duration::from_secs(10);
        let given_up = tokio::time::timeout(
            Duration::from_millis(200),
            t.post_once(stall, &McpHeaders::default(), wait),
        )
        .await;
        assert!(given_up.is_err(), "the stalled answer never ends");
        assert_eq!(t.pool.counts(), (0, 0), "its connection went with it");
        let ping = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        let reply = t
            .post_once(ping, &McpHeaders::default(), wait)
            .await
            .unwrap();
        assert_eq!((reply.status, reply.messages.len()), (200, 1));
    }

    #[tokio::test]
    async fn at_the_answer_budget_the_largest_answer_being_read_fails_and_frees_its_bytes() {
        use crate::transport::Unreadable;
        use crate::transport::wire_for_tests::read_request;
        use tokio::io::AsyncWriteExt;
        // Call 1 gets 600 000 bytes of a longer body, then nothing; call 2 a whole answer of
        // 700 000 bytes. Together they pass a budget of 1 MiB while call 2 is read.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let Some((_, body)) = read_request(&mut sock, &mut buf).await else {
                        return;
                    };
                    let first = body.windows(6).any(|w| w == b"\"id\":1");
                    let (id, text, length) = if first {
                        (1, 600_000, 2_000_000)
                    } else {
                        (2, 700_000, 0)
                    };
                    let mut answer =
                        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"text":""#).into_bytes();
                    answer.resize(answer.len() + text, b'x');
                    answer.extend_from_slice(b"\"}}");
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        if first { length } else { answer.len() }
                    );
                    let sent = if first { &answer[..text] } else { &answer[..] };
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(sent).await;
                    // Call 1's answer never ends: wait for the client to hang up.
                    let _ = read_request(&mut sock, &mut buf).await;
                });
            }
        });
        let budget = AnswerBudget::new(1 << 20);
        let opts = HttpOptions {
            answer_budget: budget.clone(),
            ..HttpOptions::default()
        };
        let mut t = HttpTransport::new(HttpClient::new(&url, &opts).unwrap(), &opts);
        let call = |id: i64| {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            Outgoing::single(Bytes::from(body), Some(Id::Num(id)), McpHeaders::default())
        };
        let stalled = t.send(call(1));
        // Drive the transport until call 1's 600 000 bytes are held.
        let held = async {
            while budget.in_flight() < 600_000 {
                let _ = tokio::time::timeout(Duration::from_millis(20), t.next_event()).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), held)
            .await
            .expect("call 1's bytes arrive");
        let whole = t.send(call(2));
        let mut ends = Vec::new();
        while ends.len() < 4 {
            let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
                .await
                .expect("both calls end");
            ends.push(match ev {
                Event::Message {
                    exchange, bytes, ..
                } => (exchange, format!("{} bytes", bytes.len())),
                Event::Unreadable {
                    exchange,
                    why: Unreadable::TooLarge,
                    ..
                } => (exchange, "oversized".into()),
                Event::Closed { exchange, ids, .. } => (Some(exchange), format!("closed {ids:?}")),
                other => panic!("{other:?}"),
            });
        }
        ends.sort_by_key(|(ex, _)| ex.map(|e| e.0));
        assert_eq!(
            ends,
            [
                (Some(stalled), "oversized".into()),
                (Some(stalled), format!("closed {:?}", [Id::Num(1)])),
                (Some(whole), "700045 bytes".into()),
                (Some(whole), format!("closed {:?}", [Id::Num(2)])),
            ]
        );
        assert_eq!(budget.in_flight(), 0, "every byte charged was given back");
        assert_eq!(
            t.pool.counts().0,
            1,
            "the failed answer's connection is closed, the other kept"
        );
    }
}
