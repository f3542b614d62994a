//! One exchange: a request and its answer on one connection, from the dial or the first byte
//! written to the answer's last, as a stream the transport polls inline (no task, no channel).
//! A load exchange reports events, the terminal one last; a side exchange (a handshake step,
//! a probe, a cancel notification, a session's DELETE) reads its answer whole into a
//! [`Reply`].
//!
//! SSE resumption (2025-11-25, transports page, "Resumability and Redelivery"): a single
//! request's SSE stream that ends cleanly without its response, after an event with an id
//! and a `retry:` advice, is not the request's end. The exchange hands the transport a GET
//! for the same id carrying `Last-Event-ID`, to go out once the advised delay has passed (or
//! the request's deadline, whichever comes first); its answer's events pair like any other.
//! A resumed stream that ends again the same way is resumed again, at most
//! [`MAX_RESUMPTIONS`] times; one refused (405 included) or ending otherwise leaves the id
//! `missing`, counted in `sse_resumptions_failed`.

use super::Reply;
use super::body::{BodyReader, Piece};
use super::client::{Method, RequestHead};
use super::connection::{Connection, Head};
use crate::jsonrpc::{Id, response_id};
use crate::transport::auth::Challenge;
use crate::transport::budget::AnswerBudget;
use crate::transport::{BodyKind, Event, ExchangeId, Outgoing, TransportError, Unreadable};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::Abortable;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The most GETs one request's answer is resumed with.
pub(super) const MAX_RESUMPTIONS: u32 = 8;

pub(super) fn too_slow() -> TransportError {
    TransportError::Timeout("the exchange outlasted its time limit".into())
}

/// A request to send, and what its answer is for.
pub(super) struct Request {
    pub(super) exchange: ExchangeId,
    pub(super) method: Method,
    pub(super) out: Outgoing,
    /// Read the answer whole into a [`Reply`] (a side request) instead of reporting events.
    pub(super) whole: bool,
    /// A head of its own (a session restart's, which must not carry the stale session);
    /// `None`: the transport's.
    pub(super) head: Option<Box<RequestHead>>,
    /// Its time limit runs from `since`.
    pub(super) since: tokio::time::Instant,
    pub(super) limit: Option<Duration>,
    /// A resumption's `Last-Event-ID` (a GET), and how many resumptions the answer has had.
    pub(super) last_event_id: Option<http::HeaderValue>,
    pub(super) resumptions: u32,
    /// A single load request (of the legacy era: no headers of its own) that is sent again in
    /// a new session if its session turns out gone (once: a retry is not retried).
    pub(super) retriable: bool,
    /// A single load request that is sent again with a newer token if the target answers it
    /// 401 (once: a retry is not retried).
    pub(super) auth_retriable: bool,
}

impl Request {
    /// A load request: its answer comes as events.
    pub(super) fn load(
        exchange: ExchangeId,
        out: Outgoing,
        limit: Option<Duration>,
        since: tokio::time::Instant,
    ) -> Self {
        Request {
            exchange,
            method: Method::Post,
            out,
            whole: false,
            head: None,
            since,
            limit,
            last_event_id: None,
            resumptions: 0,
            retriable: false,
            auth_retriable: false,
        }
    }

    /// When a resumption that waits `delay` goes out: after the delay, or at the request's
    /// deadline if that comes first (then it fails at once, as too slow).
    pub(super) fn resume_at(&self, delay: Duration) -> tokio::time::Instant {
        let due = tokio::time::Instant::now() + delay;
        self.limit.map_or(due, |l| due.min(self.since + l))
    }

    pub(super) fn is_load(&self) -> bool {
        !self.whole
    }

    /// Whether it is the load request of `id` alone (not in a batch).
    pub(super) fn is_single(&self, id: &Id) -> bool {
        self.is_load() && !self.out.batch && self.out.ids.len() == 1 && self.out.ids[0] == *id
    }
}

/// What an exchange stream yields to the transport.
pub(super) enum Item {
    /// One of a load exchange's events.
    Event(Event),
    /// A load exchange's terminal event, its answer saying that the session it was sent in
    /// is gone; with the request to send again in the new session, when it may be.
    Lost {
        event: Event,
        generation: u64,
        resend: Option<Box<Request>>,
    },
    /// A load exchange's terminal event, answered 401 to a request sent with token `token`
    /// (0: none); the challenge, and the request to send again with a newer token, when it
    /// may be.
    Unauthorized {
        event: Event,
        /// The virtual user whose token it was (`None`: the shared one).
        user: Option<u32>,
        token: u64,
        challenge: Option<Box<str>>,
        resend: Option<Box<Request>>,
    },
    /// A side exchange's whole answer, or why there is none (boxed: a load exchange's items
    /// stay small).
    Reply {
        exchange: ExchangeId,
        reply: Box<Result<Reply, TransportError>>,
        /// The answer said the session the request carried is gone.
        session_lost: bool,
    },
    /// The answer's SSE stream ended early: resume it with this GET after `delay`.
    Resume {
        request: Box<Request>,
        delay: Duration,
    },
    /// A resumed answer ended without its response: its id ends `missing`.
    ResumeFailed,
    /// A resumption's delay is over: the GET goes out now.
    Due(Box<Request>),
    /// A connection opened for the requests waiting, or why it could not be.
    Dialed(Result<Connection, TransportError>),
    /// The credentials of a user's token (`None`: the shared one) changed (a token came, a
    /// fetch failed): the requests held for it go out, or fail.
    TokenNews(Option<u32>),
    /// The exchange's connection is free again: ready for the next request, or gone
    /// (`None`). Its answer has been read, so the exchange can no longer be closed to cancel
    /// (`closable`: the id it could be closed under).
    Conn {
        exchange: ExchangeId,
        back: Option<Connection>,
        closable: Option<Id>,
        /// The token the request carried (its user's, and its generation), when its answer
        /// was a 2xx.
        accepted: Option<(Option<u32>, u64)>,
    },
}

// An exchange lives in one allocation (its box) whatever its phase; boxing the reader would
// add one per exchange.
#[allow(clippy::large_enum_variant)]
pub(super) enum Phase {
    /// The connection opened for the requests waiting failed, and this one, the longest
    /// waiting, fails with why.
    Unconnected(TransportError),
    /// Writing the request, reading the answer's head.
    Head(Connection),
    Body {
        conn: Connection,
        status: u16,
        retry_after_s: Option<u64>,
        reader: BodyReader,
    },
    Done,
}

/// What tells that a request's session is gone (docs/metrics.md, "Sessions"), for a request
/// that carried a session id.
#[derive(Clone, Copy, Debug)]
pub(super) struct SessionWatch {
    /// Every 400 says so (`session_lost_on_400`), not only one whose error does.
    pub(super) any_400: bool,
}

impl SessionWatch {
    /// Whether an answer of `status` says the session is gone; `says`: its body held a
    /// JSON-RPC error saying the session is unknown.
    fn lost(self, status: u16, says: bool) -> bool {
        status == 404 || status == 400 && (self.any_400 || says)
    }
}

/// What an exchange owes the transport's pool when it ends.
enum Owed {
    /// The connection taken or being opened: it comes back closed (`None`) unless its answer
    /// was read whole.
    Lost,
    /// The connection, its answer read whole and fit to serve again.
    Kept(Connection),
    Returned,
}

/// What becomes of an answer.
// A load exchange's events live in the exchange's one allocation (its box); boxing them
// would add an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Sink {
    Events(Events),
    /// Boxed: only side exchanges pay for it.
    Whole(Box<Whole>),
}

/// A load exchange's events, and what it needs to report its end.
struct Events {
    exchange: ExchangeId,
    ids: Vec<Id>,
    batch: bool,
    queue: VecDeque<Event>,
    /// A batch's answer held a JSON array (so it was answered, not refused as a whole).
    answered_array: bool,
    /// The code of the refusal's own error: a refused batch's one error, or a single
    /// request's error for none of its ids.
    error_code: Option<i64>,
    /// What a resumption needs: the request's time limit, and how often it was resumed.
    since: tokio::time::Instant,
    limit: Option<Duration>,
    resumptions: u32,
    /// The answer is an SSE stream, and its response came on it (single requests only).
    sse: bool,
    answered: bool,
    /// What follows the events: a resumption, or the failure of one.
    then: Option<Output>,
    /// The request carried a session id: how to tell its loss.
    watch: Option<SessionWatch>,
    /// An error in the answer said the session is unknown.
    said_unknown: bool,
    /// The request's body and headers, kept to send it again if its session is gone (a
    /// legacy request: no headers of its own) or if it is answered 401.
    resend: Option<(bytes::Bytes, crate::transport::McpHeaders)>,
    /// It may be sent again for its session (`Request::retriable`), for a token
    /// (`Request::auth_retriable`).
    session_retriable: bool,
    auth_retriable: bool,
    /// The virtual user that sent it (`token_per_user`).
    user: Option<u32>,
}

/// A side exchange's answer, gathered until its end.
struct Whole {
    head: Option<Head>,
    messages: Vec<(Instant, bytes::Bytes)>,
    unreadable: Vec<Unreadable>,
    done: Option<Box<Result<Reply, TransportError>>>,
}

/// What an exchange hands over, before the transport's bookkeeping (a reply boxed, so
/// events move inline).
enum Output {
    Event(Event),
    Reply(Box<Result<Reply, TransportError>>),
    Resume(Box<Request>, Duration),
    ResumeFailed,
}

/// One request and its answer. Lives in one box from its request to its end, so no state is
/// copied per event.
pub(super) struct Exchange {
    exchange: ExchangeId,
    sink: Sink,
    phase: Phase,
    /// The exchange's time limit, if any.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The session generation it was sent in.
    generation: u64,
    max: usize,
    /// What its answer's reader charges (none: nothing); taken by the reader when the head comes.
    budget: Option<AnswerBudget>,
    owed: Owed,
    /// The id its stream is closed under to cancel it, if it is.
    closable: Option<Id>,
    /// The request carried a session id: how to tell its loss.
    watch: Option<SessionWatch>,
    /// Its answer said the session is gone.
    lost: bool,
    /// The token it was sent with (0: none), when the transport has credentials, and the
    /// user whose token that is (`None`: the shared one).
    token: Option<u64>,
    user: Option<u32>,
    /// Its answer's status, once its head came.
    status: u16,
    /// Its answer was a 401, with this `WWW-Authenticate`.
    unauthorized: bool,
    challenge: Option<Box<str>>,
}

impl Exchange {
    /// The exchange of `request`, started in `phase` (its connection dialing or taken);
    /// `watch` when the request carried a session id.
    pub(super) fn new(
        request: Request,
        phase: Phase,
        generation: u64,
        max: usize,
        budget: Option<AnswerBudget>,
        closable: Option<Id>,
        watch: Option<SessionWatch>,
    ) -> Self {
        let sink = if request.whole {
            Sink::Whole(Box::new(Whole {
                head: None,
                messages: Vec::new(),
                unreadable: Vec::new(),
                done: None,
            }))
        } else {
            Sink::Events(Events {
                exchange: request.exchange,
                ids: request.out.ids,
                batch: request.out.batch,
                queue: VecDeque::new(),
                answered_array: false,
                error_code: None,
                since: request.since,
                limit: request.limit,
                resumptions: request.resumptions,
                sse: false,
                answered: false,
                then: None,
                watch,
                said_unknown: false,
                resend: (request.retriable || request.auth_retriable)
                    .then_some((request.out.body, request.out.headers)),
                session_retriable: request.retriable,
                auth_retriable: request.auth_retriable,
                user: request.out.user,
            })
        };
        Exchange {
            exchange: request.exchange,
            sink,
            phase,
            timer: request
                .limit
                .map(|t| Box::pin(tokio::time::sleep_until(request.since + t))),
            generation,
            max,
            budget,
            owed: Owed::Lost,
            closable,
            watch,
            lost: false,
            token: None,
            user: None,
            status: 0,
            unauthorized: false,
            challenge: None,
        }
    }

    /// The exchange carries token `token` (0: none) of `user`'s credentials (`None`: the
    /// shared ones).
    pub(super) fn with_token(mut self: Box<Self>, user: Option<u32>, token: u64) -> Box<Self> {
        self.token = Some(token);
        self.user = user;
        self
    }

    /// Ends the exchange in a transport failure, after what the body held so far. Its
    /// connection goes with it. `in_body`: the body broke off after the head (a whole reply
    /// keeps what came, as `broken`).
    fn fail(&mut self, error: TransportError, in_body: bool) {
        let sink = &mut self.sink;
        let kind = match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Body {
                mut reader, status, ..
            } => {
                reader.break_off(Instant::now(), &mut |p| sink.piece(p, status));
                Some(reader.kind())
            }
            _ => None,
        };
        sink.fail(error, kind.filter(|_| in_body));
    }

    /// The answer's head came: the body is read next.
    fn on_head(&mut self, mut head: Head, conn: Connection) {
        let mut reader = BodyReader::new(head.kind, self.max, self.budget.take());
        let status = head.status;
        self.status = status;
        if self.token.is_some()
            && matches!(status, 401 | 403)
            && matches!(self.sink, Sink::Events(_))
        {
            self.challenge = head.challenge.take();
        }
        let sink = &mut self.sink;
        let worth_reading = head
            .length
            .is_none_or(|n| reader.announced(n, Instant::now(), &mut |p| sink.piece(p, status)));
        self.phase = Phase::Body {
            conn,
            status,
            retry_after_s: head.retry_after_s,
            reader,
        };
        match &mut self.sink {
            Sink::Whole(w) => w.head = Some(head),
            Sink::Events(e) => e.sse = head.kind == BodyKind::Sse,
        }
        if !worth_reading {
            self.abandon_body();
        }
    }

    /// The rest of the body is not worth reading: the answer ends with what came, and the
    /// connection is dropped.
    fn abandon_body(&mut self) {
        let Phase::Body {
            reader,
            status,
            retry_after_s,
            ..
        } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return;
        };
        self.finish(status, retry_after_s, reader.kind());
    }

    /// The answer ended: whether it says the session is gone is settled here.
    fn finish(&mut self, status: u16, retry_after_s: Option<u64>, body: BodyKind) {
        self.lost = self
            .watch
            .is_some_and(|w| w.lost(status, self.sink.said_unknown()));
        // A 403 asking for a wider scope may be stepped up (once), as a 401 refreshed.
        self.unauthorized = self.token.is_some()
            && (status == 401
                || status == 403 && Challenge::asks_for_scope(self.challenge.as_deref()));
        self.sink.finish(status, retry_after_s, body);
    }

    /// The body ended whole: the connection may serve again.
    fn on_body_end(&mut self) {
        let Phase::Body {
            conn,
            status,
            retry_after_s,
            mut reader,
        } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return;
        };
        if conn.keeps_alive() {
            self.owed = Owed::Kept(conn);
        }
        let sink = &mut self.sink;
        reader.finish(Instant::now(), status < 400, &mut |p| sink.piece(p, status));
        if let Sink::Events(e) = sink
            && status < 400
            && let Some((id, delay)) = reader.resume_point()
            && let Some(request) = e.resumption(id)
        {
            e.then = Some(Output::Resume(Box::new(request), delay));
            return;
        }
        self.finish(status, retry_after_s, reader.kind());
    }

    fn poll_output(&mut self, cx: &mut Context<'_>) -> Poll<Option<Output>> {
        loop {
            if let Some(out) = self.sink.pop() {
                return Poll::Ready(Some(out));
            }
            if !matches!(self.phase, Phase::Done)
                && let Some(timer) = &mut self.timer
                && timer.as_mut().poll(cx).is_ready()
            {
                self.fail(too_slow(), false);
                continue;
            }
            match &mut self.phase {
                Phase::Done => return Poll::Ready(None),
                Phase::Unconnected(_) => {
                    let Phase::Unconnected(e) = std::mem::replace(&mut self.phase, Phase::Done)
                    else {
                        unreachable!("matched above")
                    };
                    self.fail(e, false);
                }
                Phase::Head(conn) => {
                    let details = matches!(self.sink, Sink::Whole(_));
                    match std::task::ready!(conn.poll_head(cx, details)) {
                        Err(e) => self.fail(e, false),
                        Ok(head) => {
                            let Phase::Head(conn) = std::mem::replace(&mut self.phase, Phase::Done)
                            else {
                                unreachable!("matched above")
                            };
                            self.on_head(head, conn);
                        }
                    }
                }
                Phase::Body {
                    conn,
                    status,
                    reader,
                    ..
                } => {
                    let status = *status;
                    let sink = &mut self.sink;
                    if reader.picked() {
                        // The answer budget ran out and picked this answer, the largest read.
                        reader.give_up(Instant::now(), &mut |p| sink.piece(p, status));
                        self.abandon_body();
                        continue;
                    }
                    let mut more = true;
                    let mut feed = |chunk: &[u8]| {
                        more = reader.feed(chunk, Instant::now(), &mut |p| sink.piece(p, status));
                    };
                    match conn.poll_body(cx, &mut feed) {
                        // Woken when more comes, or when the budget picks this answer.
                        Poll::Pending if reader.watch(cx.waker()) => {}
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(e)) => self.fail(e, true),
                        Poll::Ready(Ok(false)) => self.on_body_end(),
                        // A body or an SSE event past the bound, or refused by the budget:
                        // the rest is not read.
                        Poll::Ready(Ok(true)) if !more => self.abandon_body(),
                        Poll::Ready(Ok(true)) => {}
                    }
                }
            }
        }
    }

    /// Hands the connection back once the answer is over: with the connection if its answer
    /// was read whole, without if it closed; `None` once handed back.
    fn release(&mut self) -> Option<Item> {
        let back = match std::mem::replace(&mut self.owed, Owed::Returned) {
            Owed::Returned => return None,
            Owed::Lost => None,
            Owed::Kept(conn) => Some(conn),
        };
        Some(Item::Conn {
            exchange: self.exchange,
            back,
            closable: self.closable.take(),
            accepted: (self.token)
                .filter(|_| (200..300).contains(&self.status))
                .map(|t| (self.user, t)),
        })
    }
}

impl futures_util::Stream for Exchange {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        let out = std::task::ready!(this.poll_output(cx));
        // The connection goes back as soon as the answer is read, before any of its events:
        // the response pairs its request, and the request the worker sends in its place must
        // find the connection idle rather than open another.
        if matches!(this.phase, Phase::Done)
            && let Some(conn) = this.release()
        {
            if let Some(out) = out {
                this.sink.unpop(out);
            }
            return Poll::Ready(Some(conn));
        }
        Poll::Ready(out.map(|out| match out {
            Output::Event(event) if this.lost && event.is_terminal() => {
                this.lost = false;
                Item::Lost {
                    resend: this.sink.resend(&event, false),
                    event,
                    generation: this.generation,
                }
            }
            Output::Event(event) if this.unauthorized && event.is_terminal() => {
                this.unauthorized = false;
                Item::Unauthorized {
                    resend: this.sink.resend(&event, true),
                    event,
                    user: this.user,
                    token: this.token.unwrap_or(0),
                    challenge: this.challenge.take(),
                }
            }
            Output::Event(event) => Item::Event(event),
            Output::Reply(reply) => Item::Reply {
                exchange: this.exchange,
                reply,
                session_lost: std::mem::take(&mut this.lost),
            },
            Output::Resume(request, delay) => Item::Resume { request, delay },
            Output::ResumeFailed => Item::ResumeFailed,
        }))
    }
}

/// An exchange in flight: abortable when it may be closed to cancel (a 2026-07-28 request, a
/// probe's call) or given up. Boxed: `SelectAll` moves a stream into a new task after each
/// item it yields.
pub(super) enum Flow {
    Plain(Box<Exchange>),
    Abortable(Abortable<Box<Exchange>>),
    /// A resumption waiting out its delay; yields it once due.
    Resuming {
        at: Pin<Box<tokio::time::Sleep>>,
        request: Option<Box<Request>>,
    },
    /// Requests held for a user's token (`None`: the shared one): yields
    /// [`Item::TokenNews`] once its credentials change.
    Token(Option<u32>, Option<BoxFuture<'static, ()>>),
    /// A connection being opened for the requests waiting: yields [`Item::Dialed`].
    Dial(Option<BoxFuture<'static, Result<Connection, TransportError>>>),
}

impl futures_util::Stream for Flow {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        match self.get_mut() {
            Flow::Plain(s) => s.poll_next_unpin(cx),
            Flow::Abortable(s) => s.poll_next_unpin(cx),
            Flow::Resuming { at, request } => {
                std::task::ready!(at.as_mut().poll(cx));
                Poll::Ready(request.take().map(Item::Due))
            }
            Flow::Token(user, news) => match news {
                Some(f) => {
                    std::task::ready!(f.as_mut().poll(cx));
                    *news = None;
                    Poll::Ready(Some(Item::TokenNews(*user)))
                }
                None => Poll::Ready(None),
            },
            Flow::Dial(dial) => match dial {
                Some(f) => {
                    let dialed = std::task::ready!(f.as_mut().poll(cx));
                    *dial = None;
                    Poll::Ready(Some(Item::Dialed(dialed)))
                }
                None => Poll::Ready(None),
            },
        }
    }
}

impl Sink {
    /// An error in the answer said the session is unknown.
    fn said_unknown(&self) -> bool {
        match self {
            Sink::Events(e) => e.said_unknown,
            Sink::Whole(w) => w.messages.iter().any(|(_, m)| says_session_unknown(m)),
        }
    }

    /// The request of a load exchange refused for its lost session (`for_token`: answered
    /// 401), to send again: a single request, once.
    fn resend(&mut self, end: &Event, for_token: bool) -> Option<Box<Request>> {
        let (Sink::Events(e), Event::Refused { ids, .. }) = (self, end) else {
            return None;
        };
        let [id] = ids.as_slice() else {
            return None;
        };
        let may = if for_token {
            e.auth_retriable
        } else {
            e.session_retriable
        };
        let (body, headers) = e.resend.take().filter(|_| may)?;
        let out = Outgoing::single(body, Some(id.clone()), headers).by(e.user);
        Some(Box::new(Request::load(
            e.exchange,
            out,
            e.limit,
            tokio::time::Instant::now(),
        )))
    }

    fn pop(&mut self) -> Option<Output> {
        match self {
            // A failed resumption is told before the end it goes with: the worker may stop
            // polling once its last request has ended.
            Sink::Events(e) => (e.then)
                .take_if(|t| matches!(t, Output::ResumeFailed))
                .or_else(|| e.queue.pop_front().map(Output::Event))
                .or_else(|| e.then.take()),
            Sink::Whole(w) => w.done.take().map(Output::Reply),
        }
    }

    /// Puts back what [`Sink::pop`] gave.
    fn unpop(&mut self, out: Output) {
        match (self, out) {
            (Sink::Events(e), Output::Event(event)) => e.queue.push_front(event),
            (Sink::Events(e), then @ (Output::Resume(..) | Output::ResumeFailed)) => {
                e.then = Some(then)
            }
            (Sink::Whole(w), Output::Reply(reply)) => w.done = Some(reply),
            _ => unreachable!("a sink gives only its own kind"),
        }
    }

    fn piece(&mut self, p: Piece, status: u16) {
        match self {
            Sink::Events(e) => e.piece(p, status),
            Sink::Whole(w) => match p {
                Piece::Message(at, bytes) => w.messages.push((at, bytes)),
                Piece::Unreadable(_, why) => w.unreadable.push(why),
            },
        }
    }

    /// The answer ended (read whole, or no longer read past the size bound).
    fn finish(&mut self, status: u16, retry_after_s: Option<u64>, body: BodyKind) {
        match self {
            Sink::Events(e) => e.finish(status, retry_after_s, body),
            Sink::Whole(w) => w.done = Some(Box::new(Ok(w.reply(body, None)))),
        }
    }

    /// The exchange failed; `broken_body`: after its head, with a body of that kind.
    fn fail(&mut self, error: TransportError, broken_body: Option<BodyKind>) {
        match self {
            Sink::Events(e) => e.queue.push_back(Event::Failed {
                exchange: Some(e.exchange),
                ids: std::mem::take(&mut e.ids),
                error,
            }),
            Sink::Whole(w) => {
                w.done = Some(Box::new(match broken_body {
                    Some(kind) if w.head.is_some() => Ok(w.reply(kind, Some(error))),
                    _ => Err(error),
                }))
            }
        }
    }
}

impl Whole {
    fn reply(&mut self, body: BodyKind, broken: Option<TransportError>) -> Reply {
        let head = self.head.take().expect("a reply has a head");
        let details = head.details.map(|d| *d).unwrap_or_default();
        Reply {
            status: head.status,
            body,
            content_type: details.content_type,
            session_id: details.session_id,
            location: details.location,
            retry_after_s: head.retry_after_s,
            challenge: head.challenge.map(String::from),
            messages: std::mem::take(&mut self.messages),
            unreadable: std::mem::take(&mut self.unreadable),
            broken,
        }
    }
}

impl Events {
    /// Looks at a message of an answer of `status` (>= 400) to a request that carried a
    /// session: whether an error in it says the session is unknown; whether it answers the
    /// request itself (then the request has its end and is not sent again). True when it is
    /// the server saying the session is gone, which is no message: an error for none of its
    /// ids (id null, absent or another) in a 404, or in a 400 that says so (any 400 with
    /// `session_lost_on_400`).
    fn is_session_refusal(&mut self, status: u16, bytes: &[u8]) -> bool {
        let Some(watch) = self.watch else {
            return false;
        };
        if !matches!(status, 400 | 404) {
            return false;
        }
        self.said_unknown |= status == 400 && says_session_unknown(bytes);
        if !is_refusal_error(bytes, &self.ids) {
            if response_id(bytes).is_some_and(|id| self.ids.contains(&id)) {
                self.resend = None;
            }
            return false;
        }
        watch.lost(status, self.said_unknown)
    }

    fn piece(&mut self, p: Piece, status: u16) {
        let exchange = Some(self.exchange);
        match p {
            Piece::Message(at, bytes) => {
                if status >= 400 && self.is_session_refusal(status, &bytes) {
                    // The refusal itself, like a refused batch's one error: not a message.
                    return;
                }
                if matches!(status, 401 | 403) {
                    if !response_id(&bytes).is_some_and(|id| self.ids.contains(&id)) {
                        // An authorization refusal (an OAuth error object, an error with id
                        // null): the refusal itself, not a message.
                        return;
                    }
                    self.resend = None;
                }
                if status >= 400 && !self.batch && self.error_code.is_none() {
                    // A single request refused with an error for none of its ids (-32022,
                    // say): the refusal's code goes with it (`version_rejected`). Only the
                    // body of a refusal is read for it.
                    if is_refusal_error(&bytes, &self.ids) {
                        self.error_code = error_code(&bytes);
                    }
                }
                if self.batch && status >= 400 {
                    if !starts_array(&bytes) {
                        // The server's one answer to a batch it refused: the refusal itself.
                        self.error_code = self.error_code.or_else(|| error_code(&bytes));
                        return;
                    }
                    self.answered_array = true;
                }
                // Whether a resumption is owed is decided here, before the correlator (in
                // the worker) reads the message: this one pass is the price of it.
                if self.sse && !self.answered && !self.batch {
                    self.answered = (self.ids.first())
                        .is_some_and(|id| response_id(&bytes).as_ref() == Some(id));
                }
                self.queue.push_back(Event::Message {
                    exchange,
                    batch: self.batch,
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

    /// The GET that resumes this answer's stream after the event `last_event_id`, when it
    /// may be resumed: a single request, unanswered, resumed fewer than [`MAX_RESUMPTIONS`]
    /// times.
    fn resumption(&self, last_event_id: &[u8]) -> Option<Request> {
        let [id] = self.ids.as_slice() else {
            return None;
        };
        if self.batch || self.answered || self.resumptions >= MAX_RESUMPTIONS {
            return None;
        }
        let last_event_id = http::HeaderValue::from_bytes(last_event_id).ok()?;
        Some(Request {
            exchange: self.exchange,
            method: Method::Get,
            out: Outgoing::single(bytes::Bytes::new(), Some(id.clone()), Default::default()),
            whole: false,
            head: None,
            since: self.since,
            limit: self.limit,
            last_event_id: Some(last_event_id),
            resumptions: self.resumptions + 1,
            retriable: false,
            auth_retriable: false,
        })
    }

    fn finish(&mut self, status: u16, retry_after_s: Option<u64>, body: BodyKind) {
        let ids = std::mem::take(&mut self.ids);
        let exchange = self.exchange;
        let batch = self.batch;
        if self.resumptions > 0 && !self.answered {
            // A resumption refused (405: the server offers no GET stream) or ended without
            // the response: the request's answer (a 2xx stream) ended without it.
            self.then = Some(Output::ResumeFailed);
            self.queue.push_back(Event::Closed {
                exchange,
                ids,
                batch,
                status: if status >= 400 { 200 } else { status },
                body: BodyKind::Sse,
            });
            return;
        }
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

/// Whether a JSON text is an error response for none of `ids` (its id null, absent, or
/// another): what a server answers a request it refused before reading it.
fn is_refusal_error(b: &[u8], ids: &[Id]) -> bool {
    #[derive(serde::Deserialize)]
    struct E<'a> {
        #[serde(default)]
        id: Option<Id>,
        #[serde(borrow)]
        error: Option<&'a serde_json::value::RawValue>,
    }
    serde_json::from_slice::<E>(b)
        .is_ok_and(|e| e.error.is_some() && e.id.is_none_or(|id| !ids.contains(&id)))
}

/// Whether a JSON text is an error saying the request's session is unknown: the code the
/// SDKs give it (-32001), or a message naming a session as not found, unknown, invalid,
/// expired or terminated ("Bad Request: No valid session ID provided", "Session not
/// found").
pub(super) fn says_session_unknown(b: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct E {
        error: C,
    }
    #[derive(serde::Deserialize)]
    struct C {
        #[serde(default)]
        code: Option<i64>,
        #[serde(default)]
        message: String,
    }
    let Ok(e) = serde_json::from_slice::<E>(b) else {
        return false;
    };
    let m = e.error.message.to_ascii_lowercase();
    e.error.code == Some(SESSION_NOT_FOUND)
        || m.contains("session")
            && [
                "not found",
                "unknown",
                "no valid",
                "invalid",
                "expired",
                "terminated",
            ]
            .iter()
            .any(|w| m.contains(w))
}

/// The JSON-RPC error code the SDKs' servers give an unknown session.
const SESSION_NOT_FOUND: i64 = -32001;

#[cfg(test)]
mod tests {
    use super::*;

    /// A phase moves several times per request: past about 128 bytes each move is a call to
    /// memmove, which cost 5% CPU per request when a phase was 328 bytes (issue #10).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_phase_stays_small_enough_to_move_inline() {
        assert!(size_of::<Phase>() <= 112, "{} bytes", size_of::<Phase>());
    }

    #[test]
    fn an_error_saying_the_session_is_unknown_is_recognised() {
        for says in [
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#,
            r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"unknown session"}}"#,
        ] {
            assert!(says_session_unknown(says.as_bytes()), "{says}");
            assert!(is_refusal_error(says.as_bytes(), &[Id::Num(7)]), "{says}");
        }
        for not in [
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: Mcp-Session-Id header is required"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"session":"not found"}}"#,
            "Session not found",
        ] {
            assert!(!says_session_unknown(not.as_bytes()), "{not}");
        }
        let mine = br#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":""}}"#;
        assert!(!is_refusal_error(mine, &[Id::Num(7)]));
        assert!(is_refusal_error(mine, &[Id::Num(8)]));
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
