//! A session's GET stream, read on a connection of its own (outside the pool, so it never
//! holds a request's place): the legacy HTTP+SSE transport's session stream, whose first
//! event names the endpoint, and a legacy Streamable HTTP session's standalone stream, on
//! which the server sends requests of its own (`elicitation/create` with no related call).

use super::client::{HttpClient, Method, RequestHead};
use super::connection::Connection;
use crate::transport::budget::AnswerBudget;
use crate::transport::sse::{SseEvent, SseParser};
use crate::transport::{BodyKind, ExchangeId, McpHeaders, TransportError};
use futures_util::future::BoxFuture;
use std::collections::VecDeque;
use std::task::{Context, Poll, ready};
use std::time::Instant;

/// The exchange ids of streams count down from the top, so they never meet the POSTs'.
const FIRST_STREAM: u64 = u64::MAX;

/// The exchange id of session `generation`'s stream.
pub(super) fn stream_exchange(generation: u64) -> ExchangeId {
    ExchangeId(FIRST_STREAM - generation)
}

/// One session's stream: dialed, its head read, then its events.
pub(super) struct SessionStream {
    /// The session it belongs to (1 for the first).
    pub(super) generation: u64,
    pub(super) exchange: ExchangeId,
    state: StreamState,
    parser: SseParser,
    /// Events parsed and not yet handed on.
    parsed: VecDeque<(Instant, SseEvent)>,
}

enum StreamState {
    Dialing(BoxFuture<'static, Result<Connection, TransportError>>),
    Head(Connection),
    Body(Connection),
    Ended,
}

/// What a stream yields.
pub(super) enum Yield {
    Event(Instant, SseEvent),
    /// The stream is over: at its end (`None`), or failed; an event cut off at the end is
    /// reported first.
    End(Option<TransportError>),
}

impl SessionStream {
    /// The GET of `head` at `client`'s URL, dialed now, for session `generation`, its events
    /// bounded as answers are (`max_message_bytes`, `budget`); its
    /// `endpoint` events are reported as such when `endpoints` (the legacy HTTP+SSE
    /// transport), else read as any event's data.
    pub(super) fn open(
        client: &HttpClient,
        head: RequestHead,
        generation: u64,
        max_message_bytes: usize,
        budget: AnswerBudget,
        endpoints: bool,
    ) -> Self {
        let dial = client.connect();
        let parser = SseParser::with_budget(max_message_bytes, Some(budget));
        SessionStream {
            generation,
            exchange: stream_exchange(generation),
            state: StreamState::Dialing(Box::pin(async move {
                let mut conn = dial.await?;
                conn.start(|w| head.encode(Method::Get, &McpHeaders::default(), None, b"", w));
                Ok(conn)
            })),
            parser: if endpoints {
                parser.report_endpoints()
            } else {
                parser
            },
            parsed: VecDeque::new(),
        }
    }

    pub(super) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Yield> {
        loop {
            if let Some((at, event)) = self.parsed.pop_front() {
                return Poll::Ready(Yield::Event(at, event));
            }
            match &mut self.state {
                StreamState::Dialing(dial) => match ready!(dial.as_mut().poll(cx)) {
                    Ok(conn) => self.state = StreamState::Head(conn),
                    Err(e) => return self.end(Some(e)),
                },
                StreamState::Head(conn) => match ready!(conn.poll_head(cx, false)) {
                    Ok(head) if head.status == 200 && head.kind == BodyKind::Sse => {
                        let StreamState::Head(conn) =
                            std::mem::replace(&mut self.state, StreamState::Ended)
                        else {
                            unreachable!("in the head state");
                        };
                        self.state = StreamState::Body(conn);
                    }
                    Ok(head) => {
                        let kind = match head.kind {
                            BodyKind::Sse => "an event stream",
                            BodyKind::Json => "JSON",
                            BodyKind::Empty | BodyKind::Other => "no event stream",
                        };
                        let why = format!("GET answered HTTP {} with {kind}", head.status);
                        return self.end(Some(TransportError::Request(why)));
                    }
                    Err(e) => return self.end(Some(e)),
                },
                StreamState::Body(conn) => {
                    let (parser, parsed) = (&mut self.parser, &mut self.parsed);
                    let mut feed = |chunk: &[u8]| {
                        let at = Instant::now();
                        parser.feed(chunk, |e| parsed.push_back((at, e)));
                    };
                    match ready!(conn.poll_body(cx, &mut feed)) {
                        Ok(true) => {}
                        Ok(false) => return self.end(None),
                        Err(e) => return self.end(Some(e)),
                    }
                }
                StreamState::Ended => return Poll::Pending,
            }
        }
    }

    /// Drives the stream until its head is read: ready with true when it is open (an event
    /// read meanwhile stays first), false when it was refused or failed.
    pub(super) fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        loop {
            match self.state {
                StreamState::Body(_) => return Poll::Ready(true),
                StreamState::Ended => return Poll::Ready(false),
                StreamState::Dialing(_) | StreamState::Head(_) => {}
            }
            match ready!(self.poll_next(cx)) {
                Yield::Event(at, event) => self.parsed.push_front((at, event)),
                Yield::End(_) => return Poll::Ready(false),
            }
        }
    }

    /// Ends the stream; an event cut off by its end comes first.
    fn end(&mut self, error: Option<TransportError>) -> Poll<Yield> {
        self.state = StreamState::Ended;
        if self.parser.finish() {
            self.parsed.push_back((Instant::now(), SseEvent::Oversized));
        }
        Poll::Ready(Yield::End(error))
    }
}
